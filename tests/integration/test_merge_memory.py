"""The streaming merge of a run's per-process files (issue 28 item 3): `opsight run` merges
the files its processes wrote; merge_native_files does it in bounded memory where
merge_trace_files held the whole run (13.8 GiB for 60 M spans). The inputs are real
recorder files (opsight_synthetic_run, one process each); each merge runs in a child whose
peak RSS the kernel reports (ru_maxrss), as in test_pipeline_memory.py.
"""
import json
import subprocess
import sys

import pytest

pytest.importorskip("opsight._native", reason="the opsight package is not installed")

SPANS_PER_FILE = 1_500_000
FILES = 3
# What the merge may hold beyond the interpreter and the module: 8 MiB windows of an input,
# 1 MiB of output, one 4 MiB part of the time index, the names and threads.
BOUND = 32 * 2**20

# Forks a child that runs CODE (argv[1]) with the arguments after it and prints the
# child's peak RSS last on stderr (a fresh interpreter: pytest's pages are not counted).
MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-c", *sys.argv[1:]])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"\\nopsight-test-maxrss-kb {usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""

MERGE_STREAMED = ("import sys, opsight._native as n; "
                  "print(n.merge_native_files(sys.argv[2:], sys.argv[1]), file=sys.stderr)")
MERGE_WHOLE = ("import sys, opsight._native as n; "
               "n.merge_trace_files(sys.argv[2:]).write(sys.argv[1])")
IMPORT_ONLY = "import sys, opsight._native as n"


def run_measured(code: str, *arguments: str) -> int:
    done = subprocess.run([sys.executable, "-c", MEASURE, code, *arguments],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
    error = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{code} failed:\n{error}"
    return int(error.rstrip().rpartition("\nopsight-test-maxrss-kb ")[2]) * 1024


@pytest.fixture(scope="module")
def process_files(tmp_path_factory, build_program):
    directory = tmp_path_factory.mktemp("merge")
    synthetic = build_program("src/session/opsight_synthetic_run")
    paths = []
    for index in range(FILES):
        path = directory / f"trace.{index}.opsight"
        subprocess.run([str(synthetic), str(path), str(SPANS_PER_FILE), str(2 + index)],
                       check=True, timeout=300, capture_output=True)
        paths.append(str(path))
    return paths


def test_a_streamed_merge_holds_a_constant_and_reads_back_as_the_whole_one(
        process_files, cli_path, tmp_path):
    # One name in two folders: the reports name their file.
    (tmp_path / "streamed").mkdir()
    (tmp_path / "whole").mkdir()
    streamed = tmp_path / "streamed" / "run.opsight"
    whole = tmp_path / "whole" / "run.opsight"
    baseline = run_measured(IMPORT_ONLY)
    rss = run_measured(MERGE_STREAMED, str(streamed), *process_files)
    whole_rss = run_measured(MERGE_WHOLE, str(whole), *process_files)
    inputs = sum(pathlib_size(path) for path in process_files)
    assert inputs > 4 * BOUND, "the test needs inputs several times the bound"
    assert rss < baseline + BOUND, (rss, baseline, whole_rss, inputs)
    assert whole_rss > baseline + 4 * BOUND, (whole_rss, baseline)

    def report(path, *flags):
        done = subprocess.run([str(cli_path), "report", str(path), *flags, "--stream", "off"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout

    for flags in (("--summary", "--format", "json"), ("--tree", "--format", "json"),
                  ("--table",)):
        streamed_report, whole_report = report(streamed, *flags), report(whole, *flags)
        same = streamed_report == whole_report  # not compared by pytest: a diff of megabytes
        assert same, flags
    rows = json.loads(report(streamed, "--summary", "--format", "json"))
    assert sum(row["count"] for row in rows) > FILES * SPANS_PER_FILE * 0.99


def test_convert_merges_native_files_streaming(process_files, cli_path, tmp_path):
    """`opsight convert A.opsight B.opsight OUT.opsight --stream on` merges through the same
    streaming merge: a constant peak RSS, the reports of the in-memory merge."""
    (tmp_path / "streamed").mkdir()
    (tmp_path / "whole").mkdir()
    outputs = {}
    peaks = {}
    for stream, folder in (("on", "streamed"), ("off", "whole")):
        outputs[stream] = tmp_path / folder / "run.opsight"
        command = [str(cli_path), "convert", *process_files, str(outputs[stream]),
                   "--stream", stream]
        peaks[stream] = run_measured(
            "import os, sys; pid = os.fork()\n"
            "if pid == 0: os.execv(sys.argv[1], sys.argv[1:])\n"
            "_, status, _ = os.wait4(pid, 0); sys.exit(os.waitstatus_to_exitcode(status))",
            *command)
    assert peaks["on"] < BOUND + 48 * 2**20, peaks  # the binary and this interpreter
    assert peaks["off"] > 4 * peaks["on"], peaks
    for flags in (("--summary", "--format", "json"), ("--tree", "--format", "json")):
        reports = [subprocess.run([str(cli_path), "report", str(outputs[stream]), *flags],
                                  capture_output=True, text=True, timeout=600).stdout
                   for stream in ("on", "off")]
        same = reports[0] == reports[1]
        assert same, flags


def test_opsight_run_merges_streaming_and_prints_the_streamed_reports(tmp_path):
    """`opsight run --merge stream` of a program with a child process: the output reads back
    as the in-memory merge of another run of it does, the summary is printed, the tree is
    left out with a line saying why."""
    program = tmp_path / "app.py"
    program.write_text(
        "import subprocess, sys\n"
        "import opsight\n"
        "@opsight.trace\n"
        "def work(n):\n"
        "    return sum(range(n))\n"
        "for i in range(200):\n"
        "    work(100)\n"
        "if len(sys.argv) == 1:\n"
        "    subprocess.run([sys.executable, __file__, 'child'], check=True)\n")
    outputs = {}
    for merge in ("stream", "whole"):
        output = tmp_path / f"{merge}.opsight"
        done = subprocess.run([sys.executable, "-m", "opsight", "run", "--merge", merge,
                               "--no-store", "--report", "summary,tree", "-o", str(output),
                               "--", sys.executable, str(program)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "opsight summary" in done.stderr, done.stderr
        outputs[merge] = output
        if merge == "stream":
            assert "merged streaming" in done.stderr, done.stderr
            assert "the tree report reads the whole trace" in done.stderr, done.stderr
    import opsight._native as native

    streamed = native.read_trace(str(outputs["stream"]))
    whole = native.read_trace(str(outputs["whole"]))
    assert streamed.run_info()["slices"] == whole.run_info()["slices"] >= 400
    assert streamed.run_info()["processes"] == whole.run_info()["processes"] == 2
    # Two runs of the program: the same spans, not the same times.
    def calls(trace):
        rows = json.loads(trace.render("summary", "json", "total", 0, 0))
        return sorted((row["name"], row["count"]) for row in rows)

    assert calls(streamed) == calls(whole)
    assert ("work", 400) in calls(streamed)


def pathlib_size(path: str) -> int:
    import os

    return os.path.getsize(path)
