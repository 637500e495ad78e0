"""A long run through the pipeline: record -> report -> convert, peak memory and throughput
per stage (docs/performance.md, "Runs of hours: memory per stage").

Records a synthetic run of SPANS spans with the real recorder (``opsight_synthetic_run``:
threads of request > forward > two operators, an argument per request, a counter), then
runs each stage as its own process and reports, per stage, wall time, CPU time, peak RSS
(``ru_maxrss`` of the child, started from a small interpreter), RSS per span, and throughput. ``cat FILE > /dev/null`` of the
recorded file is the baseline measured in the same run: the cost of the bytes alone. The
report and the converters run both ways, whole trace (``--stream off``) and streaming
(``--stream on``), and the two outputs of each report are compared (printed: identical or
not). ``--reports`` chooses the reports (default: ``--summary``, ``--merged-tree`` and
``--breakdown forward``); ``--no-convert`` leaves the converters out.

    python3 benchmarks/python/pipeline_memory.py [--spans 10000000] [--threads 4]
        [--opsight build/release/src/cli/opsight]
        [--synthetic build/release/src/session/opsight_synthetic_run] [--dir /tmp]
        [--reports summary,merged-tree,breakdown] [--no-convert] [--keep]

Every stage's exit status is checked; a stage that fails stops the benchmark with its
output (no figure is printed for a stage that did not complete).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


# Runs argv[1:] as the child of a small fresh interpreter and prints its rusage last on
# stderr: ru_maxrss counts what a process held before its exec, so a child forked straight
# from a larger process would report that process's pages.
MEASURE = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
sys.stderr.write(f"\\npipeline-rusage {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime} {wall}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


# The outputs `opsight convert --stream on` writes from a native file (docs/formats.md,
# "Streaming conversion").
STREAMED_OUTPUTS = ("json", "pftrace")

# The reports measured, by --reports name: the arguments after the file.
REPORTS = {
    "summary": ["--summary"],
    "merged-tree": ["--merged-tree"],
    "breakdown": ["--breakdown", "forward"],
}


def run_stage(command: list[str], stdout_path: str | None = None) -> dict:
    """Runs ``command`` to completion; its wall time, CPU time and peak RSS (bytes). Its
    standard output goes to ``stdout_path`` when given."""
    with open(stdout_path or os.devnull, "wb") as stdout:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", MEASURE, *command],
                              stdout=stdout, stderr=subprocess.PIPE)
    error = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        sys.exit(f"pipeline_memory: {' '.join(command)} exited {done.returncode}:\n{error}")
    maxrss_kb, cpu_s, wall_s = error.rstrip().rpartition("\npipeline-rusage ")[2].split()
    return {"wall_s": float(wall_s), "cpu_s": float(cpu_s), "peak_rss": int(maxrss_kb) * 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--opsight", default="build/release/src/cli/opsight")
    parser.add_argument("--synthetic", default="build/release/src/session/opsight_synthetic_run")
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--keep", action="store_true", help="keep the files written")
    parser.add_argument("--reports", default="summary,merged-tree,breakdown",
                        help="comma-separated: " + ", ".join(REPORTS))
    parser.add_argument("--no-convert", action="store_true", help="leave the converters out")
    options = parser.parse_args()
    reports = [name for name in options.reports.split(",") if name]
    for name in reports:
        if name not in REPORTS:
            sys.exit(f"pipeline_memory: --reports: unknown report {name!r}: one of "
                     + ", ".join(REPORTS))
    for tool in (options.opsight, options.synthetic):
        if not os.access(tool, os.X_OK):
            sys.exit(f"pipeline_memory: {tool}: not built (cmake --build --preset release)")

    base = os.path.join(options.dir, f"pipeline-{options.spans}")
    native = base + ".opsight"
    outputs = {"json": base + ".json", "pftrace": base + ".pftrace"}
    summaries: dict[str, str] = {}
    identical: dict[str, bool] = {}
    stages: list[tuple[str, dict, int]] = []  # (name, measures, bytes that stage produced/read)
    try:
        record = run_stage([options.synthetic, native, str(options.spans), str(options.threads)])
        native_bytes = os.path.getsize(native)
        stages.append(("record (synthetic run)", record, native_bytes))
        run_stage(["cat", native])  # warms the page cache: every reader sees the file hot
        stages.append(("cat FILE > /dev/null", run_stage(["cat", native]), native_bytes))
        for report in reports:
            for stream in ("off", "on"):
                summaries[report + stream] = base + f".{report}-{stream}.txt"
                measures = run_stage([options.opsight, "report", native, *REPORTS[report],
                                      "--stream", stream], stdout_path=summaries[report + stream])
                stages.append((f"report --{report}" + (" --stream" if stream == "on" else ""),
                               measures, native_bytes))
            with open(summaries[report + "off"], "rb") as whole, \
                    open(summaries[report + "on"], "rb") as streamed:
                identical[report] = whole.read() == streamed.read()
        for kind, path in (() if options.no_convert else outputs.items()):
            measures = run_stage([options.opsight, "convert", native, path, "--stream", "off"])
            stages.append((f"convert -> .{kind}", measures, os.path.getsize(path)))
            if kind in STREAMED_OUTPUTS:
                measures = run_stage([options.opsight, "convert", native, path, "--stream", "on"])
                stages.append((f"convert -> .{kind} --stream", measures, os.path.getsize(path)))
    finally:
        if not options.keep:
            for path in [native, *outputs.values(), *summaries.values()]:
                if os.path.exists(path):
                    os.remove(path)

    spans = options.spans
    print(f"{spans:,} spans, {options.threads} threads; native file {native_bytes / 1e6:,.0f} MB")
    print(f"{'stage':<32} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'B/span':>8} "
          f"{'M spans/s':>10} {'MB/s':>8}")
    for name, measures, size in stages:
        print(f"{name:<32} {measures['wall_s']:>8.2f} {measures['cpu_s']:>8.2f} "
              f"{measures['peak_rss'] / 1e6:>12,.0f} {measures['peak_rss'] / spans:>8.1f} "
              f"{spans / measures['wall_s'] / 1e6:>10.2f} {size / measures['wall_s'] / 1e6:>8,.0f}")
    for report, same in identical.items():
        print(f"streamed --{report} identical to the whole-trace one:", same)
    print("MB/s: bytes produced (record, convert) or read (cat, report) per wall second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
