"""The run store through the CLI: save, runs, show, rm, retention, references, processes
saving at once, and damage (a store that is not one, a store cut short, one damaged trace).

Every test has its own OPSIGHT_HOME under tmp_path: the real ~/.opsight is never touched.
"""
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import time

import pytest


def chrome_trace(path, names_and_durations, pid=1):
    """A small Chrome JSON trace: one root "request" holding the given spans in turn."""
    events, start = [], 10
    for name, duration in names_and_durations:
        events.append({"ph": "X", "name": name, "ts": start, "dur": duration, "pid": pid,
                       "tid": 1})
        start += duration + 5
    events.append({"ph": "X", "name": "request", "ts": 0, "dur": start + 10, "pid": pid,
                   "tid": 1})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture
def store(opsight_cli, tmp_path):
    """Runs the CLI with OPSIGHT_HOME=tmp_path/home; .path is the store file."""
    home = tmp_path / "home"

    def run(*args, env=None, **kwargs):
        environment = {key: value for key, value in os.environ.items()
                       if not key.startswith("OPSIGHT_")}
        environment["OPSIGHT_HOME"] = str(home)
        environment.update(env or {})
        return opsight_cli(*args, env=environment, **kwargs)

    run.home = home
    run.path = home / "runs.db"
    return run


@pytest.fixture
def trace(tmp_path):
    return chrome_trace(tmp_path / "trace.json", [("load", 100), ("infer", 300), ("load", 120)])


def save(store, *args):
    result = store("save", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def listed(store, *args):
    result = store("runs", "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_save_list_show_and_remove(store, trace, tmp_path):
    result = store("save", trace, "--name", "nightly", "--tag", "model=resnet", "--tag", "ci",
                   "--meta", "batch=8", "--package", "torch=2.3.0", "--command",
                   "python serve.py --batch 8", "--cwd", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"saved as run 1 (")
    assert result.stdout.rstrip().endswith(f") in {store.path}")
    home_mode = stat.S_IMODE(os.stat(store.home).st_mode)
    assert home_mode == 0o700

    (run,) = listed(store)
    assert run["id"] == 1 and len(run["uuid"]) == 36
    assert run["name"] == "nightly"
    assert run["command"] == "python serve.py --batch 8"
    assert run["working_directory"] == str(tmp_path)
    assert run["tags"] == {"ci": "", "model": "resnet"}
    assert run["extra"]["batch"] == "8" and run["extra"]["os"].startswith("Linux")
    assert run["versions"]["torch"] == "2.3.0" and run["versions"]["opsight"]
    assert run["slices"] == 4
    assert run["duration_ns"] == (10 + 100 + 5 + 300 + 5 + 120 + 5 + 10) * 1000
    assert run["source_format"] == "chrome-json"
    assert run["cpu"] and run["gpu"] and run["host"]
    assert run["git_commit"] == ""  # tmp_path is in no repository
    assert 0 < run["stored_bytes"] < run["trace_bytes"] * 2

    text = store("runs")
    assert text.returncode == 0
    header, row = text.stdout.splitlines()
    assert header.split() == ["id", "uuid", "created", "name", "spans", "duration", "tags",
                              "command"]
    assert row.split()[0] == "1" and "nightly" in row and "ci, model=resnet" in row

    shown = store("show", "1", "--tree")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"run 1  {run['uuid']}\n")
    for line in ("name:       nightly", "command:    python serve.py --batch 8",
                 "tags:       ci, model=resnet", "batch:      8",
                 "trace:      4 spans over 555 µs, from chrome-json"):
        assert line in shown.stdout, line
    assert "opsight tree: run 1 (nightly), 4 slices" in shown.stdout
    assert "└─ load" in shown.stdout

    summary = json.loads(store("show", "nightly", "--format", "json").stdout)
    assert summary["run"]["uuid"] == run["uuid"] and summary["view"] == "summary"
    rows = {row["name"]: row for row in summary["report"]}
    assert rows["load"]["count"] == 2 and rows["load"]["total_ns"] == 220_000

    removed = store("rm", run["uuid"][:8])
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout == f"removed run 1 (nightly) {run['uuid']}\n"
    assert listed(store) == []
    gone = store("show", "1")
    assert gone.returncode == 1
    assert gone.stderr.strip() == f"opsight: error: no run '1' in {store.path} (name a run by " \
                                  "its id, latest, latest~N, its name or at least 4 characters " \
                                  "of its uuid; `opsight runs` lists them)"


def test_several_files_merge_into_one_run(store, tmp_path):
    first = chrome_trace(tmp_path / "a.json", [("work", 100)], pid=1)
    second = chrome_trace(tmp_path / "b.json", [("work", 200), ("work", 300)], pid=2)
    saved = save(store, first, second)
    assert saved["name"] == "a"  # the first file's
    assert saved["slices"] == 5
    shown = json.loads(store("show", "latest", "--format", "json").stdout)
    assert {row["name"]: row["count"] for row in shown["report"]} == {"request": 2, "work": 3}


def test_filters_by_name_tag_and_date(store, trace):
    save(store, trace, "--name", "resnet-a", "--tag", "gpu=h100")
    save(store, trace, "--name", "resnet-b", "--tag", "gpu=a100")
    save(store, trace, "--name", "bert")
    ids = lambda *args: [run["id"] for run in listed(store, *args)]  # noqa: E731
    assert ids() == [3, 2, 1]
    assert ids("--name", "resnet*") == [2, 1]
    assert ids("--tag", "gpu") == [2, 1]
    assert ids("--tag", "gpu=h100") == [1]
    assert ids("--limit", "1") == [3]
    assert ids("--since", "1h") == [3, 2, 1]
    assert ids("--until", "1h") == []
    assert ids("--since", "2000-01-01") == [3, 2, 1]
    assert ids("--until", "2000-01-01T00:00:00Z") == []
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))
    assert ids("--until", tomorrow) == [3, 2, 1]
    none = store("runs", "--tag", "gpu=tpu")
    assert none.returncode == 0 and none.stdout == ""
    assert none.stderr.strip() == f"opsight: no runs match in {store.path}"
    bad = store("runs", "--since", "last tuesday")
    assert bad.returncode == 64
    assert "--since last tuesday: expected a date" in bad.stderr
    # Dates that would be normalised or half-read are refused, not guessed.
    for malformed in ("2024-02-31", "2024-05-01T-1:-5", "2024-05-01T 1:30", "2024-5-1"):
        assert store("runs", "--since", malformed).returncode == 64, malformed
    assert ids("--since", "2000-01-01 13:30") == [3, 2, 1]


def test_references_latest_uuid_and_name(store, trace):
    first = save(store, trace, "--name", "baseline")
    second = save(store, trace, "--name", "candidate")
    show_id = lambda reference: json.loads(  # noqa: E731
        store("show", reference, "--format", "json").stdout)["run"]["id"]
    assert show_id("latest") == second["id"]
    assert show_id("latest~1") == first["id"]
    assert show_id(first["uuid"][:6]) == first["id"]
    assert show_id(first["uuid"].upper()) == first["id"]
    assert show_id("baseline") == first["id"]
    missing = store("show", "latest~5")
    assert missing.returncode == 1
    assert f"no run 'latest~5' in {store.path}" in missing.stderr


def test_show_and_rm_without_a_store(store):
    assert not store.path.exists()
    shown = store("show", "latest")
    assert shown.returncode == 1
    assert shown.stderr.strip() == f"opsight: error: no run store at {store.path}"
    runs = store("runs", "--format", "json")
    assert runs.returncode == 0 and json.loads(runs.stdout) == []
    assert store("rm", "--keep-last", "1").returncode == 0
    assert not store.path.exists()  # reading commands never create a store


def test_rm_by_reference_and_by_retention(store, trace):
    for index in range(5):
        save(store, trace, "--name", f"run{index}")
    unknown = store("rm", "2", "nosuch")
    assert unknown.returncode == 1
    assert "no run 'nosuch'" in unknown.stderr and "nothing removed" in unknown.stderr
    assert len(listed(store)) == 5
    usage = store("rm")
    assert usage.returncode == 64
    assert store("rm", "--older-than", "soon").returncode == 64
    # An age past int64 nanoseconds is refused, not wrapped into "remove everything".
    for huge in ("20000w", "99999999d"):
        assert store("rm", "--older-than", huge).returncode == 64, huge
    assert len(listed(store)) == 5

    kept = store("rm", "--keep-last", "3")
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout == "removed 2 runs by retention (keeping the newest 3)\n"
    assert [run["id"] for run in listed(store)] == [5, 4, 3]
    assert store("rm", "--older-than", "1d").stdout == "removed 0 runs by retention (older than 1d)\n"
    time.sleep(1.1)
    aged = store("rm", "--older-than", "1s")
    assert aged.stdout == "removed 3 runs by retention (older than 1s)\n"
    assert listed(store) == []
    assert save(store, trace)["id"] == 6  # ids are never reused


def test_keep_runs_variable_applies_after_each_save(store, trace):
    for _ in range(4):
        result = store("save", trace, env={"OPSIGHT_KEEP_RUNS": "2"})
        assert result.returncode == 0, result.stderr
    assert [run["id"] for run in listed(store)] == [4, 3]
    assert "OPSIGHT_KEEP_RUNS=2: removed 1 older run" in result.stderr
    bad = store("save", trace, env={"OPSIGHT_KEEP_RUNS": "two"})
    assert bad.returncode == 0
    assert "OPSIGHT_KEEP_RUNS=two is not a whole number: keeping every run" in bad.stderr
    assert len(listed(store)) == 3
    zero = store("save", trace, env={"OPSIGHT_KEEP_RUNS": "0"})  # 0 keeps every run
    assert zero.returncode == 0, zero.stderr
    assert len(listed(store)) == 4


def test_a_directory_named_like_a_run_does_not_hide_it(store, trace, tmp_path):
    save(store, trace, "--name", "base")
    (tmp_path / "base").mkdir()
    for command in (("report", "base"), ("compare", "base", "base")):
        result = store(*command, cwd=tmp_path)
        assert result.returncode == 0, (command, result.stderr)


def test_metadata_that_is_not_utf8_keeps_json_valid(store, trace):
    saved = store("save", trace, "--format", "json", "--command", "python app.py caf\udce9.txt")
    assert saved.returncode == 0, saved.stderr
    json.loads(saved.stdout)
    assert len(json.loads(store("runs", "--format", "json").stdout)) == 1


def test_store_option_overrides_opsight_home(store, trace, tmp_path):
    elsewhere = tmp_path / "deep" / "er" / "store.db"
    saved = save(store, trace, "--store", elsewhere)
    assert saved["store"] == str(elsewhere)
    assert not store.path.exists()
    assert len(listed(store, "--store", elsewhere)) == 1
    assert stat.S_IMODE(os.stat(elsewhere.parent).st_mode) == 0o700


def test_git_commit_of_the_working_directory(store, trace, tmp_path):
    if shutil.which("git") is None:
        pytest.fail("git is needed by this test (Debian package git)")
    repository = tmp_path / "repo"
    (repository / "sub").mkdir(parents=True)
    environment = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                       GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    for command in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(command, cwd=repository, check=True, env=environment)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repository, check=True, text=True,
                          capture_output=True).stdout.strip()
    assert save(store, trace, "--cwd", repository / "sub")["git_commit"] == head
    # A packed ref (git gc packs them) reads the same.
    subprocess.run(["git", "pack-refs", "--all"], cwd=repository, check=True)
    result = store("save", trace, "--format", "json", cwd=repository)
    assert json.loads(result.stdout)["git_commit"] == head


def test_processes_saving_at_once_all_land(store, cli_path, trace):
    environment = dict(os.environ, OPSIGHT_HOME=str(store.home))
    processes = [subprocess.Popen([str(cli_path), "save", str(trace), "--name", f"p{index}",
                                   "--format", "json"], env=environment,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for index in range(8)]
    outputs = [process.communicate(timeout=120) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr
    saved_ids = sorted(json.loads(stdout)["id"] for stdout, _ in outputs)
    assert saved_ids == list(range(1, 9))
    runs = listed(store)
    assert sorted(run["name"] for run in runs) == [f"p{index}" for index in range(8)]
    assert len({run["uuid"] for run in runs}) == 8


def test_save_reports_unusable_and_damaged_input(store, tmp_path, trace):
    missing = store("save", tmp_path / "absent.json")
    assert missing.returncode == 1
    assert str(tmp_path / "absent.json") in missing.stderr
    assert not store.path.exists()

    native = tmp_path / "whole.opsight"
    assert store("convert", trace, native).returncode == 0
    cut = tmp_path / "cut.opsight"
    cut.write_bytes(native.read_bytes()[: native.stat().st_size - 40])
    damaged = store("save", cut, "--format", "json")
    assert damaged.returncode == 2
    assert str(cut) in damaged.stderr and "saving what was read before it" in damaged.stderr
    assert json.loads(damaged.stdout)["id"] == 1

    bad_tag = store("save", trace, "--tag", "=x")
    assert bad_tag.returncode == 64
    assert "--tag =x: expected KEY or KEY=VALUE" in bad_tag.stderr


def test_a_file_that_is_not_a_store_is_a_one_line_error(store, trace):
    store.home.mkdir()
    store.path.write_bytes(os.urandom(8192))
    for command in (["runs"], ["show", "1"], ["save", str(trace)], ["rm", "1"]):
        result = store(*command)
        assert result.returncode == 1, command
        assert result.stderr.splitlines() == [
            f"opsight: error: {store.path}: not a usable run store: file is not a database"]


def test_a_damaged_trace_leaves_the_other_runs_readable(store, trace):
    for name in ("a", "b", "c"):
        save(store, trace, "--name", name)
    with sqlite3.connect(store.path) as database:
        database.execute("UPDATE run_traces SET data = x'28b52ffd0000deadbeef' WHERE run_id = 2")
    database.close()
    assert [run["name"] for run in listed(store)] == ["c", "b", "a"]
    damaged = store("show", "2")
    assert damaged.returncode == 2
    assert damaged.stdout.startswith("run 2  ")  # the metadata is still shown
    error = damaged.stderr.strip()
    assert error.startswith(f"opsight: error: run 2 in {store.path}: its stored trace is damaged")
    for reference in ("1", "3"):
        assert store("show", reference).returncode == 0


def test_a_store_cut_short_is_read_for_what_is_left(store, tmp_path):
    big = chrome_trace(tmp_path / "big.json", [(f"op{index % 7}", 50 + index * 13 % 500)
                                               for index in range(3000)])
    for index in range(12):
        save(store, big, "--name", f"r{index}")
    size = store.path.stat().st_size
    with open(store.path, "r+b") as file:
        file.truncate(size * 3 // 4)
    result = store("runs", "--format", "json")
    assert result.returncode == 2
    assert (f"opsight: warning: {store.path}: the run store is damaged (database disk image is "
            "malformed): showing what can still be read") in result.stderr
    runs = json.loads(result.stdout)
    assert runs, "nothing of a store cut at three quarters could be read"
    shown = [store("show", str(run["id"])) for run in runs]
    assert {result.returncode for result in shown} == {2}  # every answer says "damaged"
    whole = [result for result in shown if "opsight summary: run" in result.stdout]
    lost = [result for result in shown if "its trace" in result.stderr
            or "stored trace is damaged" in result.stderr]
    assert whole, "no run of what is left could be shown"
    assert len(whole) + len(lost) == len(runs)
    refused = store("save", big)
    assert refused.returncode == 1
    assert "the run store is damaged" in refused.stderr and "opened read-only" in refused.stderr


def test_trace_arguments_name_files_or_runs(store, trace, tmp_path):
    """src/store/trace_source.hpp: an argument is a file if it exists or looks like a path,
    else a run reference (what `opsight report` and `opsight compare` take)."""
    missing_file = store("report", tmp_path / "absent.opsight")
    assert missing_file.returncode == 1
    assert missing_file.stderr.strip() == (f"opsight: error: {tmp_path / 'absent.opsight'}: "
                                           "cannot open: No such file or directory")
    no_store = store("report", "baseline")
    assert no_store.returncode == 1
    assert no_store.stderr.strip() == ("opsight: error: baseline: no such file, and no run "
                                       f"store at {store.path} to look it up as a run")
    assert not store.path.exists()

    save(store, trace, "--name", "baseline")
    by_name = store("report", "baseline", "--format", "json")
    assert by_name.returncode == 0, by_name.stderr
    assert {row["name"]: row["count"] for row in json.loads(by_name.stdout)} == {
        "request": 1, "load": 2, "infer": 1}
    header = store("report", "latest").stdout.splitlines()[0]
    assert header.startswith("opsight summary: run 1 (baseline), 4 slices")
    unknown = store("report", "candidate")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith(f"opsight: error: candidate: no such file, and no run "
                                     f"'candidate' in {store.path}")


def test_rm_keep_last_zero_is_refused_and_dry_run_removes_nothing(store, trace):
    """0 means "keep every run" in OPSIGHT_KEEP_RUNS; `rm --keep-last 0` would mean "remove
    every run": refused (64), --all says it on purpose, --dry-run lists and keeps."""
    for name in ("first", "second", "third"):
        save(store, trace, "--name", name)
    refused = store("rm", "--keep-last", "0")
    assert refused.returncode == 64
    assert "--keep-last 0 would remove every run: say --all" in refused.stderr
    dry = store("rm", "--keep-last", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert [line.split()[3] for line in dry.stdout.splitlines()[:-1]] == ["1", "2"]
    assert dry.stdout.splitlines()[-1].startswith("--dry-run: 2 runs would be removed")
    assert len(listed(store)) == 3
    everything = store("rm", "--all")
    assert everything.returncode == 0, everything.stderr
    assert "removed 3 runs (every run)" in everything.stdout
    assert listed(store) == []


def _overwrite_page(path, page_number: int, seed: int) -> None:
    """Overwrites page ``page_number`` (1-based, SQLite's numbering) with random bytes."""
    import random

    with sqlite3.connect(path) as database:
        page_size = database.execute("PRAGMA page_size").fetchone()[0]
    database.close()
    with open(path, "r+b") as file:
        file.seek((page_number - 1) * page_size)
        file.write(random.Random(seed).randbytes(page_size))


def test_a_corrupt_page_of_trace_data_loses_only_its_run(store, tmp_path):
    """docs/store.md: a corrupt page inside the stored traces costs the run whose trace it
    held (its own error, naming the run and the file) and nothing else: the list and every
    other run load. One page in the middle of a real store file is overwritten."""
    big = chrome_trace(tmp_path / "big.json", [(f"op{index % 7}", 50 + index * 13 % 500)
                                               for index in range(3000)])
    for index in range(12):
        save(store, big, "--name", f"r{index}")
    with sqlite3.connect(store.path) as database:
        page_size = database.execute("PRAGMA page_size").fetchone()[0]
    database.close()
    pages = store.path.stat().st_size // page_size
    _overwrite_page(store.path, pages * 3 // 5, seed=7)  # past the schema and the run rows
    assert len(listed(store)) == 12
    shown = {run: store("show", str(run)) for run in range(1, 13)}
    lost = {run: answer for run, answer in shown.items() if answer.returncode != 0}
    assert len(lost) == 1, {run: answer.stderr for run, answer in lost.items()}
    (run, answer), = lost.items()
    assert answer.returncode == 2
    assert answer.stdout.startswith(f"run {run}  ")  # its metadata is still shown
    assert answer.stderr.strip() == (f"opsight: error: run {run} in {store.path}: cannot read "
                                     "its trace: database disk image is malformed (the store "
                                     "file is damaged)")
    for other, answer in shown.items():
        if other != run:
            assert "opsight summary: run" in answer.stdout, answer.stderr


def test_a_corrupt_page_of_run_rows_fails_every_command_with_one_line(store, trace):
    """The page that holds the run table's rows is the store's index: with it corrupt,
    every command says so in one line naming the file, exits 1 and changes nothing."""
    for name in ("a", "b", "c"):
        save(store, trace, "--name", name)
    with sqlite3.connect(store.path) as database:
        (root,) = database.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()
    database.close()
    _overwrite_page(store.path, root, seed=3)
    before = store.path.read_bytes()
    for arguments in (("runs",), ("show", "latest"), ("save", trace), ("rm", "1")):
        answer = store(*arguments)
        assert answer.returncode == 1, (arguments, answer.stderr)
        lines = answer.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"opsight: error: {store.path}: ")
        assert "database disk image is malformed (the store file is damaged)" in lines[0]
    assert store.path.read_bytes() == before


def test_compare_says_when_two_runs_ran_on_different_hardware(store, trace):
    """Runs of one back-end label whose remote workers reported different hardware
    (worker.N.* tags, opsight.remote) are told apart, matched by spec, not by number."""
    save(store, trace, "--name", "a", "--tag", "worker.1.spec=nodeA/ort-cpu",
         "--tag", "worker.1.cpu_model=Xeon 8375C", "--tag", "worker.1.cpu_count=2")
    save(store, trace, "--name", "b", "--tag", "worker.1.spec=nodeB/eager",
         "--tag", "worker.1.cpu_model=Xeon 8375C", "--tag", "worker.2.spec=nodeA/ort-cpu",
         "--tag", "worker.2.cpu_model=EPYC 7R13", "--tag", "worker.2.cpu_count=2")
    save(store, trace, "--name", "c", "--tag", "worker.7.spec=nodeA/ort-cpu",
         "--tag", "worker.7.cpu_model=Xeon 8375C", "--tag", "worker.7.cpu_count=2")
    different = store("compare", "a", "b", "--format", "json")
    assert different.returncode == 0, different.stderr
    json.loads(different.stdout)  # stdout stays the comparison alone
    assert different.stderr.splitlines() == [
        "opsight compare: not the same hardware: nodeA/ort-cpu cpu_model: Xeon 8375C | EPYC 7R13"]
    same = store("compare", "a", "c")
    assert same.returncode == 0, same.stderr
    assert "not the same hardware" not in same.stderr
