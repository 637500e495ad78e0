"""Shared helpers of the opsight package's tests.

In-process tests record with ``opsight.profile()`` and read the spans back as a DataFrame;
end-to-end tests start real programs (written to ``tmp_path``) with the installed ``opsight``
command or with ``OPSIGHT_OUTPUT``, and read the trace files they leave.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

try:
    import opsight
    from opsight._capture import instrument as _instrument
    from opsight._session import state as _session_state
except ImportError:  # not installed: only test_targets.py (pure Python) can run
    opsight = None

#: The interpreter the package is installed in (the project's .venv when run as documented).
PYTHON = sys.executable
#: The `opsight` console command installed beside that interpreter.
OPSIGHT = str(Path(sys.executable).with_name("opsight"))


#: Runs that tests save (every ``opsight run`` does) land in a throwaway run store, never in
#: the user's ~/.opsight: OPSIGHT_HOME is set for this process and every program it starts.
STORE_HOME = tempfile.mkdtemp(prefix="opsight-tests-home-")
os.environ["OPSIGHT_HOME"] = STORE_HOME
atexit.register(shutil.rmtree, STORE_HOME, True)


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without any OPSIGHT_* variable (but OPSIGHT_HOME, the
    tests' run store), plus ``extra``."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("OPSIGHT_") or key == "OPSIGHT_HOME"}
    environment.pop("PYTHONPATH", None)
    environment.update(extra)
    return environment


#: What the suite must have: ``make test`` sets ``OPSIGHT_REQUIRE`` to the Makefile's list of
#: what its setup installs (Python packages, servers, commands), so that a test needing one of
#: them fails when it is missing instead of skipping; without the variable such a test skips,
#: saying why (-rs). Every name a test passes to ``require`` or ``require_command`` belongs in
#: that list.
REQUIRED = {name.strip() for name in os.environ.get("OPSIGHT_REQUIRE", "").split(",")
            if name.strip()}


def require(module_name: str):
    """Imports and returns ``module_name``; when it cannot be imported, fails the test (or
    the test module, at its top) if ``OPSIGHT_REQUIRE`` names it, else skips with the
    reason."""
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        if module_name in REQUIRED:
            pytest.fail(f"{module_name} is required (OPSIGHT_REQUIRE) but cannot be imported: "
                        f"{error}", pytrace=False)
        pytest.skip(f"{module_name} is not installed ({error}); OPSIGHT_REQUIRE={module_name} "
                    "makes this a failure", allow_module_level=True)


def require_command(command: str, package: str) -> str:
    """The path of ``command``; when it is not on PATH, fails the test if ``OPSIGHT_REQUIRE``
    names it, else skips saying which Debian ``package`` brings it."""
    path = shutil.which(command)
    if path is None:
        message = f"the {command} command is not installed (Debian package {package})"
        if command in REQUIRED:
            pytest.fail(f"{message} but OPSIGHT_REQUIRE names it", pytrace=False)
        pytest.skip(f"{message}; OPSIGHT_REQUIRE={command} makes this a failure")
    return path


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def run(command: list[str], cwd: Path, timeout: float = 30, **environment: str):
    """Runs ``command`` in ``cwd`` with a clean environment; returns the CompletedProcess."""
    return subprocess.run(command, cwd=cwd, env=clean_environment(**environment),
                          capture_output=True, text=True, timeout=timeout)


def opsight_run(arguments: list[str], cwd: Path, timeout: float = 30, **environment: str):
    """``opsight run ARGUMENTS`` (the installed console command)."""
    return run([OPSIGHT, "run", *arguments], cwd, timeout, **environment)


def spans_of(path: Path):
    """The spans of a trace file as a DataFrame (``opsight.spans_dataframe``)."""
    return opsight.spans_dataframe(opsight.load(path).trace)


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@pytest.fixture(autouse=True)
def _tracing_switched_on_and_no_leftovers():
    """Every test starts and ends with tracing enabled and no session or targets left."""
    if opsight is None:
        yield
        return
    opsight.enable()
    yield
    opsight.enable()
    assert _session_state.session is None, "a test left a recording session running"
    instrumenter = _instrument.installed
    _instrument.installed = None
    if instrumenter is not None:
        instrumenter.uninstall()
        pytest.fail("a test left installed targets behind")


@pytest.fixture
def fresh_modules(tmp_path, monkeypatch):
    """A folder on sys.path for modules written by the test; they are forgotten afterwards
    (``sys.modules``), so each test imports its own."""
    directory = tmp_path / "modules"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    yield directory
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(directory)):
            del sys.modules[name]


def serve_wsgi(app, environ: dict) -> tuple[list[str], bytes]:
    """Runs a WSGI request as a server does (call, iterate, close): the statuses the
    application sent and its body."""
    statuses: list[str] = []
    body = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        data = b"".join(body)
    finally:
        if hasattr(body, "close"):
            body.close()
    return statuses, data
