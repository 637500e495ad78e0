"""Fixtures for the integration tests: the built CLI, the build tree, temp files.

The CLI is, in order: $OPSIGHT_CLI, .venv/bin/opsight (what `make` installs), or the
build tree's binary. Tests run the real binary as a user would.
"""
import importlib.util
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("OPSIGHT_BUILD_DIR", ROOT / "build" / "release"))


def _find_cli() -> pathlib.Path:
    for candidate in (os.environ.get("OPSIGHT_CLI"), ROOT / ".venv" / "bin" / "opsight",
                      BUILD / "src" / "cli" / "opsight"):
        if candidate and pathlib.Path(candidate).is_file():
            return pathlib.Path(candidate)
    pytest.fail("the opsight CLI is not built: run `make install` (or set OPSIGHT_CLI)")


@pytest.fixture(scope="session")
def cli_path() -> pathlib.Path:
    return _find_cli()


@pytest.fixture(scope="session")
def opsight_cli(cli_path):
    """Runs `opsight ARGS...` and returns the CompletedProcess (text mode)."""

    def run(*args, check=False, timeout=120, env=None, cwd=None):
        return subprocess.run([str(cli_path), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, check=check, env=env, cwd=cwd)

    return run


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    return BUILD


@pytest.fixture(scope="session")
def build_program(build_dir):
    """Path of a program built in the build tree, failing clearly if it is missing."""

    def find(relative: str) -> pathlib.Path:
        path = build_dir / relative
        if not path.is_file():
            pytest.fail(f"{path} is not built: run `make build`")
        return path

    return find


def load_fixture_generators():
    """tests/data/generate_fixtures.py as a module: it writes PyTorch-profiler and ONNX
    Runtime traces with the real tools."""
    spec = importlib.util.spec_from_file_location(
        "opsight_fixture_generators", ROOT / "tests" / "data" / "generate_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
