"""The run store from Python: ``opsight run`` saves every run (``--tag``, ``--name``,
``--no-store``), ``opsight.profile(store=True)`` saves a profile, package versions are
found without importing the packages, and a failed save never changes an exit status.

Every test uses its own OPSIGHT_HOME under ``tmp_path`` (conftest.py already keeps the
whole session away from the real ~/.opsight).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from importlib import metadata

import opsight
from opsight import _store
from conftest import OPSIGHT, PYTHON, clean_environment, opsight_run, write

APP = """
import sys

def work(n):
    return sum(range(n))

def main():
    for n in (10, 20):
        work(n)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)

main()
"""

TARGETS = """
targets:
  - {module: app, function: main}
  - {module: app, function: work}
"""


def runs_in(home, *arguments):
    completed = subprocess.run([OPSIGHT, "runs", "--format", "json", *arguments],
                               capture_output=True, text=True, timeout=60,
                               env=clean_environment(OPSIGHT_HOME=str(home)))
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def program(tmp_path):
    write(tmp_path, "app.py", APP)
    write(tmp_path, "targets.yaml", TARGETS)
    return tmp_path


def test_opsight_run_saves_the_run_with_its_metadata(tmp_path):
    directory = program(tmp_path)
    home = tmp_path / "home"
    completed = opsight_run(["-c", "targets.yaml", "--tag", "model=tiny", "--tag", "ci",
                             "--", "python", "app.py"], directory, OPSIGHT_HOME=str(home))
    assert completed.returncode == 0, completed.stderr
    saved_line = [line for line in completed.stderr.splitlines() if "saved as run" in line]
    assert saved_line == [f"opsight run: saved as run 1 in {home / 'runs.db'} (opsight show 1)"]
    # after the reports and the "wrote" line
    assert completed.stderr.index("saved as run") > completed.stderr.index("opsight summary")

    (run,) = runs_in(home)
    assert run["id"] == 1
    assert run["name"] == "app.py"
    assert run["command"] == "python app.py"
    assert run["working_directory"] == str(directory)
    assert run["tags"] == {"ci": "", "model": "tiny"}
    assert run["slices"] == 3  # main, work, work
    assert run["versions"]["python"] == platform.python_version()
    assert run["versions"]["opsight"] == metadata.version("opsight")
    assert run["host"] == platform.node()
    assert run["gpu"]
    assert runs_in(home, "--tag", "model=tiny")[0]["id"] == 1
    assert runs_in(home, "--tag", "model=big") == []

    shown = subprocess.run([OPSIGHT, "show", "latest", "--format", "json"], capture_output=True,
                           text=True, timeout=60, env=clean_environment(OPSIGHT_HOME=str(home)))
    assert shown.returncode == 0, shown.stderr
    summary = {row["name"]: row for row in json.loads(shown.stdout)["report"]}
    assert summary["work"]["count"] == 2
    assert summary["main"]["count"] == 1


def test_opsight_run_name_and_no_store(tmp_path):
    directory = program(tmp_path)
    home = tmp_path / "home"
    named = opsight_run(["-c", "targets.yaml", "--name", "baseline", "--report", "none", "--",
                         "python", "app.py"], directory, OPSIGHT_HOME=str(home))
    assert named.returncode == 0, named.stderr
    assert [run["name"] for run in runs_in(home)] == ["baseline"]

    as_module = opsight_run(["-c", "targets.yaml", "--report", "none", "--", "python", "-m",
                             "app"], directory, OPSIGHT_HOME=str(home))
    assert as_module.returncode == 0, as_module.stderr
    assert [run["name"] for run in runs_in(home)] == ["app", "baseline"]
    assert runs_in(home)[0]["command"] == "python -m app"

    unsaved = opsight_run(["-c", "targets.yaml", "--no-store", "--report", "none", "--",
                           "python", "app.py"], directory, OPSIGHT_HOME=str(home))
    assert unsaved.returncode == 0, unsaved.stderr
    assert "saved as run" not in unsaved.stderr
    assert len(runs_in(home)) == 2

    elsewhere = tmp_path / "elsewhere" / "runs.db"
    other = opsight_run(["-c", "targets.yaml", "--store", str(elsewhere), "--report", "none",
                         "--", "python", "app.py", "5"], directory, OPSIGHT_HOME=str(home))
    assert other.returncode == 5, other.stderr  # the program's own status
    assert f"saved as run 1 in {elsewhere}" in other.stderr
    assert len(runs_in(home)) == 2
    assert len(runs_in(home, "--store", str(elsewhere))) == 1


def test_a_failed_save_is_a_warning_and_keeps_the_exit_status(tmp_path):
    directory = program(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    (home / "runs.db").write_bytes(b"this is not a database, but it is where one should be" * 100)
    completed = opsight_run(["-c", "targets.yaml", "--report", "none", "--", "python", "app.py",
                             "3"], directory, OPSIGHT_HOME=str(home))
    assert completed.returncode == 3, completed.stderr
    assert (f"opsight run: warning: the run was not saved in the run store: {home / 'runs.db'}: "
            "not a usable run store: file is not a database") in completed.stderr
    assert (directory / "opsight-run.opsight").is_file()  # the trace was still written


@opsight.trace
def traced_step(n):
    return sum(range(n))


def test_profile_saves_itself_when_asked(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("OPSIGHT_HOME", str(home))
    with opsight.profile(store=True, name="profiled", tags={"stage": "test"}) as prof:
        for n in range(3):
            traced_step(n)
    assert prof.saved_run is not None
    assert prof.saved_run["id"] == 1
    assert prof.saved_run["store"] == str(home / "runs.db")
    (run,) = runs_in(home)
    assert run["uuid"] == prof.saved_run["uuid"]
    assert run["name"] == "profiled"
    assert run["tags"] == {"stage": "test"}
    assert run["slices"] == 3
    assert run["versions"]["python"] == platform.python_version()

    # An explicit store path; no store at all by default.
    elsewhere = tmp_path / "other.db"
    with opsight.profile(store=elsewhere) as second:
        traced_step(1)
    assert second.saved_run["store"] == str(elsewhere)
    with opsight.profile() as third:
        traced_step(1)
    assert third.saved_run is None
    assert len(runs_in(home)) == 1


def test_profile_save_failure_is_only_a_warning(tmp_path, capsys):
    store = tmp_path / "not-a-store.db"
    store.write_bytes(b"\x00garbage" * 1000)
    with opsight.profile(store=store) as prof:
        traced_step(2)
    assert prof.saved_run is None
    assert prof.summary()[0]["name"] == "traced_step"  # the profile itself is fine
    error = capsys.readouterr().err
    assert f"opsight.profile: warning: the run was not saved in the run store: {store}" in error


def test_package_versions_do_not_import_packages(tmp_path):
    code = ("import json, sys\n"
            "import opsight._store\n"
            "versions = dict(opsight._store.package_versions())\n"
            "print(json.dumps({'versions': versions, 'torch_loaded': 'torch' in sys.modules}))\n")
    completed = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60,
                               env=clean_environment())
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["torch_loaded"] is False
    versions = result["versions"]
    assert versions["python"] == platform.python_version()
    assert versions["opsight"] == metadata.version("opsight")
    for package in ("torch", "numpy"):
        try:
            expected = metadata.version(package)
        except metadata.PackageNotFoundError:
            expected = None
        assert versions.get(package) == expected, package


def test_an_imported_package_reports_its_own_version(monkeypatch):
    class FakeTorch:
        __version__ = "9.9.9+local"

    monkeypatch.setitem(sys.modules, "torch", FakeTorch())
    assert dict(_store.package_versions())["torch"] == "9.9.9+local"
