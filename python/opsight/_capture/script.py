"""Runs a program's main script (or ``-m module``) the way ``python`` would, with the
targets of the script itself wrapped as soon as they are defined.

A script is not imported, so the import hook never sees it, and its functions are called
by the same run that defines them (``if __name__ == "__main__": main()``). So the script's
syntax tree gets one extra statement after each top-level ``def`` and ``class`` that a
target names (inside top-level ``if``/``try``/``with`` blocks too): a call that wraps what
was just defined. Line numbers are unchanged, the module's globals stay a plain dict, and
nothing else in the program changes. ``opsight run`` starts ``python -m opsight._capture.script
SCRIPT ARGS`` in place of ``python SCRIPT ARGS``; ``sys.argv`` is what the script expects.

Targets naming the module ``__main__``, or the script's own name (``main`` for
``main.py``, as in HiQ's examples), apply to the script.
"""

from __future__ import annotations

import ast
import os
import runpy
import sys
import types

from . import instrument

_APPLY_HOOK = "__opsight_apply_targets__"


class _DefinitionHooks(ast.NodeTransformer):
    """Adds ``__opsight_apply_targets__(("name",))`` after top-level definitions."""

    def __init__(self, wanted: set[str] | None) -> None:
        self._wanted = wanted  # None: every definition

    def _hook_statements(self, body: list[ast.stmt]) -> list[ast.stmt]:
        result: list[ast.stmt] = []
        for statement in body:
            result.append(self._descend(statement))
            names = self._defined_names(statement)
            if names and (self._wanted is None or names & self._wanted):
                call = ast.Expr(ast.Call(
                    func=ast.Name(_APPLY_HOOK, ast.Load()),
                    args=[ast.Tuple([ast.Constant(name) for name in sorted(names)], ast.Load())],
                    keywords=[]))
                result.append(ast.fix_missing_locations(ast.copy_location(call, statement)))
        return result

    @staticmethod
    def _defined_names(statement: ast.stmt) -> set[str]:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return {statement.name}
        return set()

    def _descend(self, statement: ast.stmt) -> ast.stmt:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(statement, field, None)
            if isinstance(statement, (ast.If, ast.Try, ast.With, ast.AsyncWith)) and isinstance(block, list):
                setattr(statement, field, self._hook_statements(block))
        if isinstance(statement, ast.Try):
            for handler in statement.handlers:
                handler.body = self._hook_statements(handler.body)
        return statement

    def visit_Module(self, node: ast.Module) -> ast.Module:
        node.body = self._hook_statements(node.body)
        return node


def compile_script(source: bytes, path: str, wanted: set[str] | None) -> types.CodeType:
    """The script's code with the definition hooks added."""
    tree = ast.parse(source, path)
    tree = _DefinitionHooks(wanted).visit(tree)
    return compile(tree, path, "exec", dont_inherit=True)


def _main_target_names(instrumenter) -> set[str] | None:
    if instrumenter is None:
        return set()
    names: set[str] = set()
    for state in instrumenter.states_for("__main__"):
        target = state.target
        first = target.class_name.split(".")[0] if target.class_name else target.function
        if any(character in first for character in "*?["):
            return None  # a pattern: hook every definition
        names.add(first)
    return names


def _new_main_module(instrumenter, wanted_attributes: dict,
                     name: str = "__main__") -> types.ModuleType:
    """An empty ``__main__`` whose definitions get wrapped as they are made."""
    main = types.ModuleType(name)
    main.__builtins__ = __builtins__  # type: ignore[attr-defined]
    for attribute, value in wanted_attributes.items():
        setattr(main, attribute, value)

    def apply_targets(names: tuple[str, ...]) -> None:
        if instrumenter is not None:
            instrumenter.apply_to_names(main.__dict__, names, main)

    setattr(main, _APPLY_HOOK, apply_targets)
    if instrumenter is not None:
        instrumenter.apply_to_module(main, "__main__")  # registers __main__ as applied
    return main


def run_script(path: str, arguments: list[str]) -> None:
    """Runs ``path`` as ``__main__`` with ``sys.argv = [path, *arguments]``."""
    instrumenter = instrument.installed
    # As `python path`: __file__ and the code's file name are absolute (a relative one
    # breaks after os.chdir), sys.path[0] is the script's real folder.
    absolute_path = os.path.abspath(path)
    try:
        with open(path, "rb") as file:
            source = file.read()
    except OSError as error:  # python's own words and status
        print(f"{sys.executable}: can't open file {absolute_path!r}: [Errno {error.errno}] "
              f"{error.strerror}", file=sys.stderr)
        sys.exit(2)
    try:
        code = compile_script(source, absolute_path, _main_target_names(instrumenter))
    except SyntaxError as error:
        error.__traceback__ = None  # python shows none: the error points into the script
        raise
    main = _new_main_module(instrumenter, {"__file__": absolute_path, "__spec__": None,
                                           "__cached__": None})
    sys.modules["__main__"] = main
    sys.argv[:] = [path, *arguments]
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    exec(code, main.__dict__)


def run_script_in_spawned_child(path: str, spawn_module: types.ModuleType) -> None:
    """``multiprocessing.spawn._fixup_main_from_path`` with the targets wrapped: a spawned
    child runs the parent's main script again as ``__mp_main__``. multiprocessing runs it
    with ``runpy.run_path``, in a throw-away namespace whose names it copies into a new
    module, so the script's functions would go on calling the unwrapped ones through their
    globals; here it runs in the very module left in ``sys.modules``."""
    current_main = sys.modules["__main__"]
    if (os.path.splitext(os.path.basename(path))[0] == "ipython"
            or getattr(current_main, "__file__", None) == path):
        return  # as multiprocessing does
    spawn_module.old_main_modules.append(current_main)
    instrumenter = instrument.installed
    with open(path, "rb") as file:
        source = file.read()
    code = compile_script(source, path, _main_target_names(instrumenter))
    main = _new_main_module(instrumenter, {"__file__": path, "__spec__": None, "__cached__": None,
                                           "__loader__": None, "__package__": ""},
                            name="__mp_main__")
    sys.modules["__main__"] = sys.modules["__mp_main__"] = main
    exec(code, main.__dict__)


def run_module(module_name: str, arguments: list[str]) -> None:
    """Runs module ``module_name`` as ``python -m`` does, with the targets of that module
    (named by its own name, ``pkg.serve``) wrapped as they are defined, as for a script."""
    instrumenter = instrument.installed
    sys.path[0] = os.getcwd()
    # runpy's own lookup (a package runs its __main__); private, but what `python -m` uses
    not_runnable = getattr(runpy, "_Error", ImportError)  # what python -m reports in one line
    try:
        module_name, spec, code = runpy._get_module_details(  # type: ignore[attr-defined]
            module_name, not_runnable)
    except not_runnable as error:
        sys.exit(f"{sys.executable}: {error}")
    source = None
    if instrumenter is not None:
        instrumenter.add_main_alias(module_name)
        # and in child processes (multiprocessing's spawn runs this module again there)
        aliases = [alias for alias in os.environ.get("OPSIGHT_MAIN_ALIASES", "").split(",") if alias]
        os.environ["OPSIGHT_MAIN_ALIASES"] = ",".join([*aliases, module_name])
        try:
            source = spec.loader.get_source(module_name)
        except (ImportError, AttributeError):
            source = None  # no source (a .pyc only): run it as it is, unwrapped
    if source is not None:
        code = compile_script(source.encode("utf-8") if isinstance(source, str) else source,
                              spec.origin, _main_target_names(instrumenter))
    main = _new_main_module(instrumenter, {
        "__file__": spec.origin, "__spec__": spec, "__loader__": spec.loader,
        "__package__": spec.parent, "__cached__": spec.cached})
    sys.modules["__main__"] = main
    sys.argv[:] = [spec.origin, *arguments]
    exec(code, main.__dict__)


_RUNNER_FILES = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}


def _run_as_python_would(run) -> None:
    """Runs ``run()``. An exception that leaves the program is printed as ``python`` prints
    it, with a traceback that starts in the program's code (not in runpy's frames or this
    module's), and ends the process with status 1. SystemExit and KeyboardInterrupt pass
    as they are (the latter so that the process still dies of SIGINT)."""
    try:
        run()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as error:
        traceback = error.__traceback__
        while (traceback is not None
               and traceback.tb_frame.f_code.co_filename in _RUNNER_FILES):
            traceback = traceback.tb_next
        error.__traceback__ = traceback  # what the default hook prints
        sys.excepthook(type(error), error, traceback)
        sys.exit(1)


def main() -> None:
    arguments = sys.argv[1:]
    if not arguments:
        sys.exit("usage: python -m opsight._capture.script SCRIPT [ARGS...] | -m MODULE [ARGS...]")
    if arguments[0] == "-m":
        if len(arguments) < 2:
            sys.exit("opsight: -m needs a module name")
        _run_as_python_would(lambda: run_module(arguments[1], arguments[2:]))
        return
    _run_as_python_would(lambda: run_script(arguments[0], arguments[1:]))


if __name__ == "__main__":
    main()
