"""Runs a program's main script (or ``-m module``) the way ``python`` would, with the
targets of the script itself wrapped as soon as they are defined.

A script is not imported, so the import hook never sees it, and its functions are called
by the same run that defines them (``if __name__ == "__main__": main()``). So the script's
syntax tree gets one extra statement after each top-level ``def`` and ``class`` that a
target names (inside top-level ``if``/``try``/``with`` blocks too): a call that wraps what
was just defined. Line numbers are unchanged, the module's globals stay a plain dict, and
nothing else in the program changes. ``opsight run`` starts ``python -m opsight._script
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

from . import _session_state

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


def run_script(path: str, arguments: list[str]) -> None:
    """Runs ``path`` as ``__main__`` with ``sys.argv = [path, *arguments]``."""
    instrumenter = _session_state.instrumenter
    with open(path, "rb") as file:
        source = file.read()
    code = compile_script(source, path, _main_target_names(instrumenter))
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = __builtins__  # type: ignore[attr-defined]
    main.__spec__ = None
    main.__cached__ = None  # type: ignore[attr-defined]

    def apply_targets(names: tuple[str, ...]) -> None:
        if instrumenter is not None:
            instrumenter.apply_to_names(main.__dict__, names, main)

    setattr(main, _APPLY_HOOK, apply_targets)
    if instrumenter is not None:
        instrumenter.apply_to_module(main, "__main__")  # registers __main__ as applied
    sys.modules["__main__"] = main
    sys.argv[:] = [path, *arguments]
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    exec(code, main.__dict__)


def main() -> None:
    arguments = sys.argv[1:]
    if not arguments:
        sys.exit("usage: python -m opsight._script SCRIPT [ARGS...] | -m MODULE [ARGS...]")
    if arguments[0] == "-m":
        if len(arguments) < 2:
            sys.exit("opsight: -m needs a module name")
        sys.argv[:] = [arguments[1], *arguments[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(arguments[1], run_name="__main__", alter_sys=True)
        return
    run_script(arguments[0], arguments[1:])


if __name__ == "__main__":
    main()
