"""The ``opsight`` command.

``run``, ``ctl`` and ``compare-backends`` are Python's (they start, steer or time Python
programs; ``compare-backends`` lives in ``opsight.torch.compare_backends``); every other
command (``report``, ``convert``, ``demo``, ``save``, ``runs``, ``show``, ``rm``,
``--version``) is the C++ command installed inside the package (``opsight/bin/opsight``),
which this one replaces itself with.

``opsight run`` stores each run in the run store (``opsight save``, docs/store.md) unless
``--no-store``; :func:`save_run` does the same for ``opsight.profile(store=True)``.

Exit status: 0 ok; 1 unusable input or a failed check; 2 damaged input; 64 bad usage.
``opsight run`` exits with the traced program's own status.
``opsight bench`` (``opsight.bench.command``) exits 1 when the model cannot be loaded or
run, 3 when the server scenario's p99 bound is not held (as ``opsight compare
--fail-on-regression`` on a regression).
``opsight compare-backends`` exits 1 when the function fails.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

from ._core_command import core_command_path, exec_core
from ._store import package_versions, save_run  # noqa: F401 - opsight.cli.save_run

USAGE_ERROR = 64
_NATIVE_HEADER_BYTES = 16  # docs/native-format.md

HELP = """\
usage: opsight COMMAND [ARGS...]

Commands:
  run      Trace an unchanged program: opsight run -c targets.yaml -- python app.py ARGS
  ctl      Switch tracing of a running traced process: opsight ctl PID on|off|status, opsight ctl list
  bench    Benchmark a model (TorchScript, ONNX, module:factory) on a back-end and scenario:
           opsight bench model.onnx --backend ort-cpu --scenario server --qps 100 (docs/bench.md)
  report   Report a trace file or a stored run: --summary, --tree, --table, --merged-tree,
           --breakdown SPAN, --ops, --critical-path, --metrics (counter tracks, span metrics)
  compare  Compare two runs or files per span and code path: opsight compare A B --fail-on-regression 5%
  compare-backends  Time a torch function on several back-ends, graph by graph, with cost per
           request: opsight compare-backends mymodels:make_predict --backends eager,inductor
  devices  List the GPUs: memory, utilization, temperature, power, health (docs/devices.md)
  convert  Convert between .opsight and Chrome JSON
  demo     Profile and benchmark a small BERT-style model (--quickstart: the C++ example)
  save     Store trace file(s) as a run in the run store ($OPSIGHT_HOME, default ~/.opsight)
  runs     List the stored runs: --name GLOB, --tag K[=V], --since 7d, --format json
  show     Show a stored run's metadata and report: opsight show latest --tree
  rm       Remove stored runs: opsight rm RUN..., --keep-last N, --older-than 30d

opsight COMMAND --help shows a command's options; opsight --version its version.
"""


# ---- opsight run --------------------------------------------------------------------------

_PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}"}


def _is_this_python(program: str) -> bool:
    if os.path.basename(program) in _PYTHON_NAMES:
        return True
    found = shutil.which(program)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def program_command(command: list[str]) -> tuple[list[str], str | None]:
    """The command to start and the main script's path (None if it runs none).

    ``python SCRIPT`` and a bare ``SCRIPT.py`` run through ``opsight._script`` with this
    environment's interpreter (the one opsight is installed in), so that targets in the
    main script are wrapped too; any other command runs as given."""
    program, rest = command[0], command[1:]
    if program.endswith(".py"):
        return [sys.executable, "-m", "opsight._script", program, *rest], program
    if _is_this_python(program):
        if rest and rest[0] == "-m" and len(rest) >= 2:
            return [sys.executable, "-m", "opsight._script", *rest], None
        if rest and not rest[0].startswith("-"):
            return [sys.executable, "-m", "opsight._script", *rest], rest[0]
        return [sys.executable, *rest], None
    return command, None


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsight run",
        description="Run a program unchanged with the targets of a targets file traced, then "
                    "print the call tree and the summary and write the trace.",
        epilog="Examples: opsight run -c targets.yaml -- python main.py --batch 8;  "
               "python -m opsight run -c targets.yaml main.py ARGS")
    parser.add_argument("-c", "--targets", help="targets file (YAML, JSON or CSV; docs/targets.md)")
    parser.add_argument("-o", "--output", default="opsight-run.opsight",
                        help="trace file written after the run: .opsight or .json (default: %(default)s)")
    parser.add_argument("--strict", action="store_true",
                        help="fail before the program starts if a target does not resolve")
    parser.add_argument("--report", default="tree,summary",
                        help="reports printed after the run (to stderr): any of tree, summary, "
                             "table, comma-separated, or none (default: %(default)s)")
    parser.add_argument("--format", choices=("text", "json", "csv"), default="text",
                        help="format of the printed reports (default: %(default)s)")
    parser.add_argument("--max-roots", type=int, default=20, help="roots shown by the tree")
    parser.add_argument("--buffer-mb", type=int, help="recording memory per process (MiB)")
    parser.add_argument("--metrics", metavar="NAMES",
                        help="metrics every traced function measures, e.g. cpu,memory "
                             "(latency, cpu, memory, heap, disk, network, gpu; docs/metrics.md)")
    parser.add_argument("--sample-ms", type=int, default=100, metavar="MS",
                        help="sample process and GPU counters every MS ms (0: off; default 100)")
    parser.add_argument("--name", help="name of the run in the run store (default: the script's)")
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="tag the stored run (repeatable; opsight runs --tag KEY=VALUE)")
    parser.add_argument("--no-store", action="store_true",
                        help="do not save the run in the run store (docs/store.md)")
    parser.add_argument("--store", metavar="PATH",
                        help="run store file (default: $OPSIGHT_HOME/runs.db, else "
                             "~/.opsight/runs.db)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    return parser


def _check_targets_strictly(targets_path: str, script: str | None) -> int:
    check = [sys.executable, "-m", "opsight._check_targets", targets_path]
    if script:
        check.append(script)
    return subprocess.call(check)


def _merge_unresolved(run_directory: str) -> list[tuple[str, str]]:
    resolved: set[str] = set()
    unresolved: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(run_directory, "targets.*.json"))):
        try:
            with open(path) as file:
                record = json.load(file)
        except (OSError, ValueError):
            continue
        resolved.update(record.get("resolved", ()))
        for entry in record.get("unresolved", ()):
            unresolved.setdefault(entry["source"], entry["reason"])
    return [(source, reason) for source, reason in unresolved.items() if source not in resolved]


def run_command(arguments: list[str]) -> int:
    parser = _run_parser()
    options = parser.parse_args(arguments)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.print_usage(sys.stderr)
        print("opsight run: no program given (opsight run -c targets.yaml -- python app.py)",
              file=sys.stderr)
        return USAGE_ERROR
    for tag in options.tag:
        if not tag.partition("=")[0]:
            print(f"opsight run: --tag {tag!r}: expected KEY=VALUE or KEY", file=sys.stderr)
            return USAGE_ERROR
    views = [view for view in options.report.split(",") if view and view != "none"]
    for view in views:
        if view not in ("tree", "summary", "table"):
            print(f"opsight run: --report: unknown report {view!r} (tree, summary, table, none)",
                  file=sys.stderr)
            return USAGE_ERROR
    from . import _native
    from .targets import TargetsError, load_targets

    targets_path = None
    if options.targets:
        targets_path = os.path.abspath(options.targets)
        try:
            load_targets(targets_path)
        except TargetsError as error:
            print(f"opsight run: {error}", file=sys.stderr)
            return 1
        except OSError as error:
            print(f"opsight run: cannot read the targets file: {error}", file=sys.stderr)
            return 1
    start_command, script = program_command(command)
    if options.strict and targets_path and _check_targets_strictly(targets_path, script) != 0:
        print("opsight run: --strict: not starting the program", file=sys.stderr)
        return 1

    run_directory = tempfile.mkdtemp(prefix="opsight-run-")
    environment = dict(os.environ)
    environment.pop("OPSIGHT_OUTPUT_OWNER", None)
    environment["OPSIGHT_OUTPUT"] = os.path.join(run_directory, "trace.%p.opsight")
    environment["OPSIGHT_RUN_DIR"] = run_directory
    if targets_path:
        environment["OPSIGHT_TARGETS"] = targets_path
    else:
        environment.pop("OPSIGHT_TARGETS", None)
    if script:
        environment["OPSIGHT_MAIN_ALIASES"] = os.path.splitext(os.path.basename(script))[0]
    if options.buffer_mb:
        environment["OPSIGHT_BUFFER_MB"] = str(options.buffer_mb)
    environment["OPSIGHT_SAMPLE_MS"] = str(max(options.sample_ms, 0))
    if options.metrics:
        from ._metrics import metric_problem

        names = [name for name in re.split(r"[,;\s]+", options.metrics) if name]
        problems = [problem for problem in map(metric_problem, names) if problem]
        if problems:
            print(f"opsight run: --metrics: {problems[0]}", file=sys.stderr)
            return USAGE_ERROR
        environment["OPSIGHT_METRICS"] = ",".join(names)
    options.program_command = command
    options.script = script
    try:
        return _run_and_report(start_command, environment, run_directory, options, views, _native)
    finally:
        shutil.rmtree(run_directory, ignore_errors=True)


def _run_and_report(start_command, environment, run_directory, options, views, native) -> int:
    try:
        child = subprocess.Popen(start_command, env=environment)
    except OSError as error:
        print(f"opsight run: cannot start {start_command[0]!r}: {error}", file=sys.stderr)
        return 127 if isinstance(error, FileNotFoundError) else 126
    # Ctrl-C reaches the program (same process group); opsight waits for it to finish.
    previous_interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_terminate = signal.signal(signal.SIGTERM, lambda number, frame: child.send_signal(number))
    try:
        status = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous_interrupt)
        signal.signal(signal.SIGTERM, previous_terminate)
    exit_status = status if status >= 0 else 128 - status

    # A process killed while it started (a pool worker ended before it was needed) leaves
    # a file with no more than its header: nothing was recorded, nothing is lost.
    files = [path for path in sorted(glob.glob(os.path.join(run_directory, "trace.*.opsight")))
             if os.path.getsize(path) > _NATIVE_HEADER_BYTES]
    if not files:
        print("opsight run: the program recorded nothing (is it a Python program run by the "
              "interpreter opsight is installed in?)", file=sys.stderr)
        return exit_status
    try:
        trace = native.merge_trace_files(files, os.path.basename(options.output))
    except ValueError as error:
        print(f"opsight run: {error}", file=sys.stderr)
        return exit_status or 1
    if trace.damage:
        print(f"opsight run: {trace.damage}", file=sys.stderr)
    for view in views:
        sys.stderr.write(trace.render(view, options.format, "total", 0, options.max_roots))
        if options.format == "text":
            sys.stderr.write("\n")
    for source, reason in _merge_unresolved(run_directory):
        print(f"opsight: target never resolved: {source}: {reason}", file=sys.stderr)
    try:
        trace.write(options.output)
    except RuntimeError as error:
        print(f"opsight run: {error}", file=sys.stderr)
        return exit_status or 1
    info = trace.run_info()
    print(f"opsight run: wrote {options.output} ({info['slices']} spans, "
          f"{info['processes']} process{'es' if info['processes'] != 1 else ''}); "
          f"opsight report {options.output} --tree", file=sys.stderr)
    if not options.no_store:
        command = options.program_command
        module = command[2] if len(command) > 2 and command[1] == "-m" else None
        name = options.name or module or os.path.basename(options.script or command[0])
        save_run(files, name=name, tags=options.tag, command=shlex.join(command),
                 store=options.store, prefix="opsight run")
    return exit_status


# ---- opsight ctl --------------------------------------------------------------------------

def ctl_command(arguments: list[str]) -> int:
    from . import _control

    parser = argparse.ArgumentParser(
        prog="opsight ctl",
        description="Switch the tracing of a running traced process on or off (its targets are "
                    "unwrapped while off, so they cost nothing), or list traced processes.")
    parser.add_argument("pid", help="process id, or 'list'")
    parser.add_argument("state", nargs="?", choices=("on", "off", "status"), default="status")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the switch")
    options = parser.parse_args(arguments)
    if options.pid == "list":
        processes = _control.traced_processes()
        if not processes:
            print("no traced processes")
        for pid, state in processes:
            print(f"{pid}\t{state}")
        return 0
    try:
        pid = int(options.pid)
    except ValueError:
        print(f"opsight ctl: {options.pid!r} is not a process id", file=sys.stderr)
        return USAGE_ERROR
    try:
        state = _control.request(pid, options.state, options.timeout)
    except RuntimeError as error:
        print(f"opsight ctl: {error}", file=sys.stderr)
        return 1
    print(f"process {pid}: tracing {state}")
    return 0


def main(arguments: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if arguments is None else arguments
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(HELP, end="")
        return 0 if arguments else USAGE_ERROR
    if arguments[0] == "run":
        return run_command(arguments[1:])
    if arguments[0] == "ctl":
        return ctl_command(arguments[1:])
    if arguments[0] == "demo":  # the real-model demo; --quickstart runs the C++ one
        from .demo import main as demo_main
        return demo_main(arguments[1:])
    if arguments[0] == "bench":  # docs/bench.md
        from .bench.command import main as bench_main
        return bench_main(arguments[1:])
    if arguments[0] == "compare-backends":  # docs/torch.md
        from .torch.compare_backends import command_main
        return command_main(arguments[1:])
    return exec_core(arguments)


if __name__ == "__main__":
    sys.exit(main())
