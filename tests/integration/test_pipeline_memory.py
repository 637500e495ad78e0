"""Memory bounds of the pipeline after a long run (issue 28): a run recorded by the real
recorder (opsight_synthetic_run), then `opsight convert` and `opsight report` as a user
runs them, each child's peak RSS read from the kernel (ru_maxrss).

The bounds are set against what the old paths held, so that a regression to them fails:
the converter used to build its whole output in memory (peak RSS above the output's
size), and the native reader kept every page of the mapped file (the file's size on top
of the model). Both are asserted gone, with the model's own size as the yardstick.
"""
import json
import subprocess
import sys

import pytest

SPANS = 2_000_000


# Runs argv[1:] as a child of a small fresh interpreter and prints its peak RSS last on
# stderr. A child forked straight from pytest would count pytest's own pages (ru_maxrss
# includes what the process held before its exec: the forked copy of the parent).
MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f"\\nopsight-test-maxrss-kb {usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(command: list[str]) -> tuple[int, str]:
    """Runs ``command``; its peak RSS in bytes and its stderr. Fails on a non-zero exit."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", MEASURE, *command],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    error = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"{command} failed:\n{error}"
    error, _, measured = error.rstrip().rpartition("\nopsight-test-maxrss-kb ")
    return int(measured) * 1024, error


@pytest.fixture(scope="module")
def long_run(tmp_path_factory, build_program):
    path = tmp_path_factory.mktemp("pipeline") / "long.opsight"
    synthetic = build_program("src/session/opsight_synthetic_run")
    subprocess.run([str(synthetic), str(path), str(SPANS), "2"], check=True, timeout=300,
                   capture_output=True)
    return path


def test_convert_streams_its_output_instead_of_holding_it(long_run, cli_path, tmp_path):
    summary_rss, _ = run_measured([str(cli_path), "report", str(long_run), "--summary"])
    for extension in ("json", "pftrace"):
        output = tmp_path / f"long.{extension}"
        rss, error = run_measured([str(cli_path), "convert", str(long_run), str(output)])
        assert f"({SPANS} slices" in error, error
        size = output.stat().st_size
        # Holding the output whole would put peak RSS above the summary's by `size`; the
        # streaming writers hold 1 MiB of it (a margin of 32 MiB for the allocator).
        assert rss < summary_rss + 32 * 2**20, (extension, rss, summary_rss, size)
        if extension == "json":
            assert size > 2 * rss / 3, "the test needs an output larger than the bound"


def test_reading_a_native_file_does_not_keep_its_pages(long_run, cli_path):
    rss, _ = run_measured([str(cli_path), "report", str(long_run), "--summary"])
    file_size = long_run.stat().st_size
    # The model holds about 62-66 bytes per span here (docs/performance.md, "Runs of
    # hours"); keeping the mapped file's pages would add its 40 bytes per span on top.
    assert rss < SPANS * 72 + 32 * 2**20, (rss, file_size)
    assert file_size > SPANS * 30, "the file should be what the recorder writes (~40 B/span)"


def test_a_streamed_convert_holds_a_constant_not_the_trace(long_run, cli_path, tmp_path):
    """`opsight convert --stream on` (the default from 1 GiB) holds the open spans and a
    window of the file, not the model: its peak RSS stays under 64 MiB while the whole-file
    path's grows with the run; the two outputs report the same summary."""
    streamed = tmp_path / "streamed.json"
    rss, error = run_measured([str(cli_path), "convert", str(long_run), str(streamed),
                               "--stream", "on"])
    assert f"({SPANS} slices" in error and "streamed" in error, error
    summary_rss, _ = run_measured([str(cli_path), "report", str(long_run), "--summary"])
    assert rss < 64 * 2**20, (rss, summary_rss)
    assert summary_rss > 2 * rss, "the test needs a run whose model is larger than the bound"
    whole = tmp_path / "whole.json"
    run_measured([str(cli_path), "convert", str(long_run), str(whole), "--stream", "off"])

    def summary(path):
        done = subprocess.run([str(cli_path), "report", str(path), "--summary", "--format",
                               "json"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        # Self time may differ where two spans tie exactly (docs/formats.md).
        return sorted((row["name"], row["count"], row["total_ns"], row["p50_ns"],
                       row["p99_ns"], row["max_ns"]) for row in rows)

    assert summary(streamed) == summary(whole)


def test_a_streamed_summary_holds_a_few_bytes_per_span(long_run, cli_path):
    """`opsight report --summary --stream on` folds each span into per-name columns as it
    ends (4 bytes a duration) instead of loading the model: its peak RSS stays under
    16 bytes per span plus a constant (the binary, an 8 MiB window of the file), while the
    whole path's holds the model; and every output format is byte for byte the whole
    path's."""
    whole_rss, _ = run_measured([str(cli_path), "report", str(long_run), "--summary",
                                 "--stream", "off"])
    rss, _ = run_measured([str(cli_path), "report", str(long_run), "--summary",
                           "--stream", "on"])
    assert rss < SPANS * 16 + 24 * 2**20, (rss, whole_rss)
    assert whole_rss > 2 * rss, "the test needs a run whose model is larger than the bound"
    for output_format in ("text", "json", "csv"):
        outputs = {}
        for stream in ("off", "on"):
            done = subprocess.run([str(cli_path), "report", str(long_run), "--summary",
                                   "--format", output_format, "--stream", stream],
                                  capture_output=True, timeout=300)
            assert done.returncode == 0, done.stderr
            outputs[stream] = done.stdout
        assert outputs["on"] == outputs["off"], output_format


def test_a_streamed_perfetto_convert_holds_a_constant(long_run, cli_path, tmp_path):
    """`opsight convert RUN.opsight OUT.pftrace --stream on` writes each span's begin and
    end as it reads them: its peak RSS stays under 64 MiB while the whole path's holds the
    model; both files report the same summary."""
    streamed = tmp_path / "streamed.pftrace"
    rss, error = run_measured([str(cli_path), "convert", str(long_run), str(streamed),
                               "--stream", "on"])
    assert f"({SPANS} slices" in error and "streamed" in error, error
    whole = tmp_path / "whole.pftrace"
    whole_rss, _ = run_measured([str(cli_path), "convert", str(long_run), str(whole),
                                 "--stream", "off"])
    assert rss < 64 * 2**20, (rss, whole_rss)
    assert whole_rss > 2 * rss, "the test needs a run whose model is larger than the bound"

    def summary(path):
        done = subprocess.run([str(cli_path), "report", str(path), "--summary", "--format",
                               "json"], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return sorted(tuple(sorted(row.items())) for row in json.loads(done.stdout))

    assert summary(streamed) == summary(whole)


def test_a_streamed_summary_of_a_killed_run_equals_the_whole_one(long_run, cli_path, tmp_path):
    """A run killed with SIGKILL leaves a file without its footer and time index, its last
    chunk possibly cut: both paths report what was written before it (exit status 2, a
    warning naming the file), with the same output."""
    data = long_run.read_bytes()
    killed = tmp_path / "killed.opsight"
    killed.write_bytes(data[: len(data) * 3 // 5])
    outputs = {}
    for stream in ("off", "on"):
        done = subprocess.run([str(cli_path), "report", str(killed), "--summary", "--table",
                               "--ops", "--stream", stream], capture_output=True, timeout=300)
        assert done.returncode == 2, done.stderr
        assert str(killed).encode() in done.stderr, done.stderr
        outputs[stream] = done.stdout
    assert outputs["on"] == outputs["off"]
    assert b"opsight summary" in outputs["on"] and b"opsight operators" in outputs["on"]


@pytest.mark.parametrize("view", [["--merged-tree"], ["--breakdown", "forward"]],
                         ids=["merged-tree", "breakdown"])
def test_a_streamed_tree_and_breakdown_hold_a_few_bytes_per_span(long_run, cli_path, view):
    """`opsight report --merged-tree` and `--breakdown SPAN` with `--stream on` fold each
    span into its code path's (or its inference's phase's) compact column as it ends,
    instead of loading the model: peak RSS under 16 bytes per span plus a constant, while
    the whole path's holds the model; every output format is byte for byte the whole
    path's, and the streamed one holds what the report shows."""
    whole_rss, _ = run_measured([str(cli_path), "report", str(long_run), *view,
                                 "--stream", "off"])
    rss, _ = run_measured([str(cli_path), "report", str(long_run), *view, "--stream", "on"])
    assert rss < SPANS * 16 + 24 * 2**20, (rss, whole_rss)
    assert whole_rss > 2 * rss, "the test needs a run whose model is larger than the bound"
    for output_format in ("text", "json", "csv"):
        outputs = {}
        for stream in ("off", "on"):
            done = subprocess.run([str(cli_path), "report", str(long_run), *view,
                                   "--format", output_format, "--stream", stream],
                                  capture_output=True, timeout=300)
            assert done.returncode == 0, done.stderr
            outputs[stream] = done.stdout
        assert outputs["on"] == outputs["off"], output_format
        if output_format == "text":
            expected = [b"handle_request", b"forward", b"aten::linear", b"aten::relu"]
            if view[0] == "--breakdown":
                expected = [b"inferences of 'forward'", b"aten::linear", b"(uncovered)"]
            for text in expected:
                assert text in outputs["on"], (text, outputs["on"][:2000])


def test_a_streamed_tree_and_breakdown_of_a_killed_run_equal_the_whole_ones(long_run, cli_path,
                                                                          tmp_path):
    """A run cut as SIGKILL leaves it: the streamed merged tree and breakdown equal the whole
    path's (spans left open are closed at their thread's last event on both paths)."""
    data = long_run.read_bytes()
    killed = tmp_path / "killed.opsight"
    killed.write_bytes(data[: len(data) * 3 // 5])
    outputs = {}
    for stream in ("off", "on"):
        done = subprocess.run([str(cli_path), "report", str(killed), "--merged-tree",
                               "--breakdown", "forward", "--stream", stream],
                              capture_output=True, timeout=300)
        assert done.returncode == 2, done.stderr
        outputs[stream] = done.stdout
    assert outputs["on"] == outputs["off"]
    assert b"opsight merged tree" in outputs["on"] and b"opsight breakdown" in outputs["on"]
