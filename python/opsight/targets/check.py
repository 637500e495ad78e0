"""``opsight run --strict``: checks, before the program starts, that every target resolves.

Run as ``python -m opsight.targets.check TARGETS [SCRIPT]`` in a throw-away process with the
program's ``sys.path`` (the script's folder first): it imports each target module and
resolves its classes and functions as the instrumenter would. Targets in the main script
are checked against its syntax tree (top-level definitions, methods of top-level classes),
without running it. Prints one line per unresolved target; exit status 1 if any.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import os
import sys

from .._capture.instrument import Instrumenter
from . import load_targets


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith)


def _top_level_statements(body: list[ast.stmt]):
    """The statements run at the top level: the body, and the blocks of top-level ``if``,
    ``try`` and ``with`` statements (where opsight._capture.script wraps definitions too)."""
    for statement in body:
        yield statement
        if isinstance(statement, _BLOCKS):
            blocks = [getattr(statement, field, None) or [] for field in ("body", "orelse", "finalbody")]
            if isinstance(statement, ast.Try):
                blocks += [handler.body for handler in statement.handlers]
            for block in blocks:
                yield from _top_level_statements(block)


def _script_definitions(script: str) -> dict[str, set[str] | None]:
    """Names defined by the script: functions map to None, classes (dotted for nested
    classes: ``Outer.Inner``) to the names of their methods."""
    with open(script, "rb") as file:
        tree = ast.parse(file.read(), script)
    names: dict[str, set[str] | None] = {}

    def add_class(node: ast.ClassDef, prefix: str) -> None:
        path = prefix + node.name
        names[path] = {item.name for item in node.body if isinstance(item, _FUNCTIONS)}
        for item in node.body:
            if isinstance(item, ast.ClassDef):
                add_class(item, path + ".")

    for node in _top_level_statements(tree.body):
        if isinstance(node, _FUNCTIONS):
            names[node.name] = None
        elif isinstance(node, ast.ClassDef):
            add_class(node, "")
    return names


def _class_matches(pattern: str, path: str) -> bool:
    """Whether dotted class ``path`` matches dotted ``pattern``, part by part (as the
    instrumenter resolves them)."""
    parts, names = pattern.split("."), path.split(".")
    return len(parts) == len(names) and all(
        fnmatch.fnmatchcase(name, part) for name, part in zip(names, parts))


def _matches(pattern: str, names) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def main() -> int:
    targets_path, script = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
    targets = load_targets(targets_path)
    main_names = {"__main__"}
    definitions: dict[str, set[str] | None] = {}
    if script:
        main_names.add(os.path.splitext(os.path.basename(script))[0])
        definitions = _script_definitions(script)
        sys.path[0] = os.path.dirname(os.path.abspath(script))
    problems = []
    module_targets = []
    for target in targets:
        if target.module in main_names and script:
            if target.class_name:
                classes = [name for name, methods in definitions.items()
                           if methods is not None and _class_matches(target.class_name, name)]
                if not classes:
                    problems.append((target, f"class {target.class_name!r} is not defined in {script}"))
                elif not any(_matches(target.function, definitions[name]) for name in classes):
                    problems.append((target, f"{target.function!r} is not a method of {target.class_name!r} in {script}"))
            elif not _matches(target.function, [name for name, kind in definitions.items() if kind is None]):
                problems.append((target, f"function {target.function!r} is not defined in {script}"))
            continue
        module_targets.append(target)
    instrumenter = Instrumenter(module_targets)
    for module_name in sorted({target.module for target in module_targets}):
        try:
            importlib.import_module(module_name)
        except Exception as error:  # the module's own failure, reported as the reason
            for target in module_targets:
                if target.module == module_name:
                    problems.append((target, f"module {module_name!r} cannot be imported: "
                                             f"{type(error).__name__}: {error}"))
    instrumenter.install()
    reported = {target.source for target, _ in problems}
    problems += [(target, reason) for target, reason in instrumenter.unresolved()
                 if target.source not in reported]
    for target, reason in problems:
        print(f"opsight run: target does not resolve: {target.source}: {reason}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
