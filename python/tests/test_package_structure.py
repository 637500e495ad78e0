"""The package's shape (docs/architecture.md): no import circle between its modules, library
code never imports the command line (``opsight._cli``), and every module imports on its
own in a fresh interpreter (so none depends on another having been imported first)."""

from __future__ import annotations

import ast
import re
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON, clean_environment, require

SOURCE = Path(__file__).resolve().parents[1] / "opsight"
PACKAGE = "opsight"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(SOURCE.rglob("*.py")):
        parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its code (inside
    functions too: a lazy import is still a dependency)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(candidate for candidate in candidates
                     if candidate in modules and candidate != module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {module: _imports(module, path, modules) for module, path in modules.items()}


def _is_cli(module: str) -> bool:
    return module in (f"{PACKAGE}._cli", f"{PACKAGE}.cli", f"{PACKAGE}.__main__") or \
        module.startswith(f"{PACKAGE}._cli.")


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan). A package importing
    its own children (re-exports), or a child its parent package, is not a circle: Python
    always initialises a parent before its children."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def is_parent_link(a: str, b: str) -> bool:
        return a == b.rsplit(".", 1)[0] or b == a.rsplit(".", 1)[0]

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if is_parent_link(node, other):
                continue
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def test_the_package_has_no_import_circle():
    graph = _graph()
    assert len(graph) > 30, "the package's modules were not found"
    assert _circles(graph) == []


def test_the_circle_check_finds_a_circle():
    # The check itself can fail: a made-up graph with a circle through three modules.
    graph = {"opsight.a": {"opsight.b"}, "opsight.b": {"opsight.c"}, "opsight.c": {"opsight.a"},
             "opsight": {"opsight.a"}}
    assert _circles(graph) == [["opsight.a", "opsight.b", "opsight.c"]]


def test_library_code_never_imports_the_command_line():
    graph = _graph()
    offenders = sorted((module, target) for module, targets in graph.items()
                       for target in targets if _is_cli(target) and not _is_cli(module))
    assert offenders == []


def test_the_package_is_grouped_in_a_few_folders():
    """The tree shows the features: few top-level private modules, one folder per concern."""
    top_level = sorted(path.name for path in SOURCE.glob("_*.py") if not path.name.startswith("__"))
    assert top_level == ["_core_command.py", "_results.py", "_store.py"]
    for folder in ("_capture", "_session", "_cli", "targets", "torch", "models", "bench",
                   "compare_backends", "demo"):
        assert (SOURCE / folder / "__init__.py").is_file(), folder


#: Modules that import an optional package at their top (the rest import it when called).
_NEEDS = {"opsight.torch._tracing": "torch", "opsight.demo.model": "torch"}


@pytest.mark.parametrize("module", sorted(m for m in _modules() if not m.endswith("__main__")))
def test_every_module_imports_alone_in_a_fresh_interpreter(module):
    needed = _NEEDS.get(module)
    if needed is not None:
        require(needed)
    completed = subprocess.run([PYTHON, "-c", f"import {module}"], capture_output=True,
                               text=True, timeout=120, env=clean_environment())
    assert completed.returncode == 0, completed.stderr


def test_importing_opsight_imports_neither_torch_nor_the_command_line():
    code = ("import sys, opsight\n"
            "print(sorted(name for name in sys.modules if name == 'torch' or "
            "name.startswith(('opsight._cli', 'opsight.compare_backends', 'opsight.models', "
            "'opsight.bench', 'opsight.demo'))))\n")
    completed = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60,
                               env=clean_environment())
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


def test_the_installed_package_is_this_source():
    # The suite runs against the installed package: it must be this tree's.
    spec = importlib.util.find_spec(PACKAGE)
    installed = Path(spec.origin).parent
    assert sorted(p.relative_to(installed).as_posix() for p in installed.rglob("*.py")) == \
        sorted(p.relative_to(SOURCE).as_posix() for p in SOURCE.rglob("*.py")), \
        "reinstall the package (make install): the installed modules differ from python/opsight"
    assert os.path.isdir(installed)


def test_python_reads_the_core_s_exit_code_table():
    # One table (include/opsight/exit_codes.hpp's kExitStatuses), every constant in it, and
    # opsight.exit_codes's names are its names, with its numbers.
    from opsight import _native, exit_codes

    header = (SOURCE.parents[1] / "include" / "opsight" / "exit_codes.hpp").read_text()
    constants = sorted(int(value) for value in
                       re.findall(r"constexpr int kExit\w+ = (\d+);", header))
    table = _native.exit_statuses()
    assert sorted(code for _, code, _ in table) == constants
    for name, code, meaning in table:
        assert getattr(exit_codes, name) == code and exit_codes.STATUSES[name] == (code, meaning)
    assert exit_codes.USAGE_ERROR == 64 and exit_codes.OK == 0


def test_the_core_s_command_list_is_the_core_command_s():
    # src/cli/commands.hpp's table (what the Python CLI dispatches to the core and prints)
    # names the subcommands the C++ command registers, and only those (its `demo` is
    # Python's command, which hands --quickstart to it).
    from opsight import _native
    from opsight._core_command import core_command_path

    help_text = subprocess.run([core_command_path(), "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    listed = help_text.split("Subcommands:", 1)[1].splitlines()
    registered = {line.split()[0] for line in listed
                  if line.startswith("  ") and not line.startswith("   ") and line.strip()}
    assert {name for name, _ in _native.core_commands()} == registered - {"demo"}
