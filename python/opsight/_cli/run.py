"""``opsight run``: run an unchanged program with a targets file's functions traced
(through ``OPSIGHT_OUTPUT`` activation in every Python process it starts), merge the
processes' traces, print the reports, write the trace and save the run in the run store."""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from .. import _native
from .._session.export import (EXPORT_VARIABLE, export_trace, parse_targets, print_reports,
                               sdk_disabled, target_problem, targets_from_environment)
from .._session import preset as _preset
from .._session.sampling import (SAMPLE_ROOT_VARIABLE, SAMPLE_SCOPE_VARIABLE, SAMPLE_SCOPES,
                                SAMPLE_VARIABLE, parse_sample_rate, parse_sample_root)
from .._store import save_run
from .arguments import ArgumentParser
from ..exit_codes import EXPORT_INCOMPLETE, OK, USAGE_ERROR

_NATIVE_HEADER_BYTES = 16  # docs/native-format.md

_PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}"}


def _is_this_python(program: str) -> bool:
    if os.path.basename(program) in _PYTHON_NAMES:
        return True
    found = shutil.which(program)
    return found is not None and os.path.realpath(found) == os.path.realpath(sys.executable)


def _injection_library() -> str | None:
    """The libopsight.so installed with the package (CUDA_INJECTION64_PATH), if any."""
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
    for name in ("libopsight.so.0", "libopsight.so"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    return None


def program_command(command: list[str]) -> tuple[list[str], str | None]:
    """The command to start and the main script's path (None if it runs none).

    ``python SCRIPT`` and a bare ``SCRIPT.py`` run through ``opsight._capture.script`` with this
    environment's interpreter (the one opsight is installed in), so that targets in the
    main script are wrapped too; any other command runs as given."""
    program, rest = command[0], command[1:]
    if program.endswith(".py"):
        return [sys.executable, "-m", "opsight._capture.script", program, *rest], program
    if _is_this_python(program):
        if rest and rest[0] == "-m" and len(rest) >= 2:
            return [sys.executable, "-m", "opsight._capture.script", *rest], None
        if rest and not rest[0].startswith("-"):
            return [sys.executable, "-m", "opsight._capture.script", *rest], rest[0]
        return [sys.executable, *rest], None
    return command, None


def _run_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="opsight run",
        description="Run a program unchanged with the targets of a targets file traced, then "
                    "print the call tree and the summary and write the trace.",
        epilog="Examples: opsight run -c targets.yaml -- python main.py --batch 8;  "
               "python -m opsight run -c targets.yaml main.py ARGS")
    parser.add_argument("-c", "--targets", help="targets file (YAML, JSON or CSV; docs/targets.md)")
    parser.add_argument("-o", "--output", default="opsight-run.opsight",
                        help=f"trace file written after the run: {_formats_help()} "
                             "(default: %(default)s)")
    parser.add_argument("--strict", action="store_true",
                        help="fail before the program starts if a target does not resolve")
    parser.add_argument("--report", default="tree,summary",
                        help="reports printed after the run (to stderr): any of tree, summary, "
                             "table, comma-separated, or none (default: %(default)s)")
    parser.add_argument("--format", choices=_native.output_formats(), default="text",
                        help="format of the printed reports (default: %(default)s)")
    parser.add_argument("--max-roots", type=int, default=20, help="roots shown by the tree")
    parser.add_argument("--buffer-mb", type=int, help="recording memory per process (MiB)")
    parser.add_argument("--metrics", metavar="NAMES",
                        help="metrics every traced function measures, e.g. cpu,memory "
                             "(latency, cpu, memory, heap, disk, network, gpu; docs/metrics.md)")
    parser.add_argument("--production", action="store_true",
                        help="the always-on preset (docs/production.md): every Python target "
                             "and module span, torch operators for 1 in 100 root spans, "
                             "counters once a second, the flight recorder keeping the last 60 "
                             "s, GPU tracing off; options given explicitly win")
    parser.add_argument("--sample-ms", type=int, metavar="MS",
                        help="sample process and GPU counters every MS ms (0: off; default 100, "
                             "1000 with --production)")
    parser.add_argument("--sample", metavar="RATE",
                        help="record this share of the units, e.g. 1/100, 0.01 or 1%% (a unit: "
                             "each root span, or each --sample-root span, with everything "
                             "under it; default: all)")
    parser.add_argument("--sample-root", metavar="NAME",
                        help="with --sample, a unit is each span of this name begun outside "
                             "one ('requests': each HTTP request; 'category:NAME': each span "
                             "of that category)")
    parser.add_argument("--sample-scope", choices=SAMPLE_SCOPES,
                        help="with --sample, what a unit sampled out leaves out: all (the "
                             "default) or only its torch operators (its spans are recorded)")
    parser.add_argument("--cuda", choices=("auto", "on", "off"),
                        help="trace CUDA kernels, copies and API calls through CUPTI (docs/gpu.md): "
                             "auto (the default) from when torch initialises CUDA, on from the "
                             "start (any program linked with libopsight too), off")
    parser.add_argument("--ring", metavar="SPEC",
                        help="flight recorder: keep only the most recent events in memory (an "
                             "age like 60s, a size like 256MiB, or both: 60s,1GiB) and write "
                             "them when a dump is triggered (opsight ctl PID dump, SIGUSR2, an "
                             "exception leaving a root span, --dump-on-slow) and at the end "
                             "(docs/production.md)")
    parser.add_argument("--dump-on-slow", metavar="NAME>DURATION",
                        help="with --ring: dump when a root span of that name lasts longer, "
                             "e.g. 'handle_request>200ms' (comma-separated rules)")
    parser.add_argument("--dump-dir", metavar="DIR",
                        help="with --ring: where dumps go (default: beside --output, "
                             "OUTPUT-dumps/PID.dump-N.opsight)")
    parser.add_argument("--no-dump-on-exception", action="store_true",
                        help="with --ring: do not dump when an exception leaves a root span")
    parser.add_argument("--name", help="name of the run in the run store (default: the script's)")
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="tag the stored run (repeatable; opsight runs --tag KEY=VALUE)")
    parser.add_argument("--merge", choices=("auto", "stream", "whole"), default="auto",
                        help="how the processes' files are merged: stream (into the .opsight "
                             "output in bounded memory, exported from the files and saved in "
                             "the run store as it is; the summary and table reports stream, "
                             "the tree is left out), whole (in memory), auto (stream from 1 GiB "
                             "of files when the output is .opsight and no export needs the "
                             "trace in memory, a Pushgateway's; default)")
    parser.add_argument("--no-store", action="store_true",
                        help="do not save the run in the run store (docs/store.md)")
    parser.add_argument("--store", metavar="PATH",
                        help="run store file (default: $OPSIGHT_HOME/runs.db, else "
                             "~/.opsight/runs.db)")
    parser.add_argument("--export", action="append", default=[], metavar="KIND[=URL]",
                        help="send the run's trace when the program ends: "
                             + ", ".join(sink["syntax"] for sink in _native.export_sinks()
                                         if sink["payload"] != "served")
                             + "; or serve live metrics while it runs: prometheus=[HOST:]PORT "
                             "(repeatable; default: $OPSIGHT_EXPORT; docs/export.md)")
    parser.add_argument("--export-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long the export may still take once the program has ended "
                             "(default 10; then what is unsent is dropped and counted)")
    parser.add_argument("--allow-export-drops", action="store_true",
                        help="exit with the program's status even when an export dropped "
                             "spans (default: 75 then, if the program exited 0)")
    parser.add_argument("--export-live", action="store_true",
                        help="send spans and log records while the program runs (each soon "
                             "after it is written) and otlp-metrics every "
                             "OTEL_METRIC_EXPORT_INTERVAL ms, not when it has ended")
    parser.add_argument("--control-port", metavar="[HOST:]PORT",
                        help="switch tracing over HTTP while the program runs: POST "
                             "/control/on, /control/off, /control/window?seconds=T; GET /control "
                             "(127.0.0.1 unless a host is given, which then needs a token)")
    parser.add_argument("--metrics-linger", type=float, default=0.0, metavar="SECONDS",
                        help="keep serving prometheus= metrics this long after the program "
                             "ends (for a last scrape)")
    parser.add_argument("--service", default="",
                        help="service.name of the exported spans (default: OTEL_SERVICE_NAME, "
                             "else the program's name)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    return parser


def _check_targets_strictly(targets_path: str, script: str | None) -> int:
    check = [sys.executable, "-m", "opsight.targets.check", targets_path]
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
    import opsight._native as _native
    from ..targets import TargetsError, load_export_targets, load_targets

    problem = _output_problem(options.output)
    if problem:
        print(f"opsight run: -o {options.output}: {problem} (the program was not started)",
              file=sys.stderr)
        return USAGE_ERROR

    targets_path = None
    file_exports: list[str] = []
    if options.targets:
        targets_path = os.path.abspath(options.targets)
        try:
            load_targets(targets_path)
            file_exports = load_export_targets(targets_path)
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

    # The targets file's export: section, then --export (OPSIGHT_EXPORT when neither names any).
    options.export_targets = (file_exports + [target for target in parse_targets(options.export)
                                              if target not in file_exports]
                              or targets_from_environment())
    # Every target (at exit and live) and the OTEL_* settings it reads, before the program
    # runs: a typo must not cost a whole run that then exports nothing.
    problem = target_problem(options.export_targets)
    if not 0 < options.export_timeout <= 86400:
        problem = f"--export-timeout {options.export_timeout:g}: expected 0 < SECONDS <= 86400"
    if problem:
        print(f"opsight run: --export: {problem} (the program was not started)", file=sys.stderr)
        return USAGE_ERROR
    if options.export_targets and sdk_disabled():
        print("opsight run: OTEL_SDK_DISABLED=true: nothing will be exported",
              file=sys.stderr)
        options.export_targets = [target for target in options.export_targets
                                  if target.split("=", 1)[0] == "prometheus"]
    from .control_server import parse_address  # [HOST:]PORT, for both listeners

    options.control_address = None
    if options.control_port:
        options.control_address = parse_address(options.control_port)
        if options.control_address is None:
            print(f"opsight run: --control-port {options.control_port}: expected [HOST:]PORT",
                  file=sys.stderr)
            return USAGE_ERROR
    options.metrics_address = None
    for target in [t for t in options.export_targets if t.split("=", 1)[0] == "prometheus"]:
        options.export_targets.remove(target)
        address = parse_address(target.partition("=")[2])
        if address is None:
            print(f"opsight run: --export {target}: expected prometheus=[HOST:]PORT",
                  file=sys.stderr)
            return USAGE_ERROR
        options.metrics_address = address
    run_directory = tempfile.mkdtemp(prefix="opsight-run-")
    environment = dict(os.environ)
    environment.pop("OPSIGHT_OUTPUT_OWNER", None)
    environment.pop(EXPORT_VARIABLE, None)  # the merged trace is exported here, not per process
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
    # The preset's defaults first, under what was given explicitly.
    for name in ("OPSIGHT_SAMPLE_MS", "OPSIGHT_CUDA", "OPSIGHT_RING", SAMPLE_SCOPE_VARIABLE,
                 _preset.PRESET_VARIABLE):
        environment.pop(name, None)
    if options.sample_ms is not None:
        environment["OPSIGHT_SAMPLE_MS"] = str(max(options.sample_ms, 0))
    if options.cuda not in (None, "auto"):
        environment["OPSIGHT_CUDA"] = "1" if options.cuda == "on" else "0"
    if options.ring is not None:
        environment["OPSIGHT_RING"] = options.ring
    if options.sample_scope is not None:
        environment[SAMPLE_SCOPE_VARIABLE] = options.sample_scope
    environment.pop("OPSIGHT_SESSION_PID", None)
    if (options.cuda != "off" and not (options.production and options.cuda is None)
            and not script and not _is_this_python(command[0])):
        # Any other program: the CUDA driver loads libopsight.so as its injection library
        # at cuInit, which records the process and its GPU (docs/gpu.md).
        library = _injection_library()
        if library:
            environment["CUDA_INJECTION64_PATH"] = library
            from .._session.gpu import cupti_path

            if "OPSIGHT_CUPTI_PATH" not in environment and cupti_path():
                environment["OPSIGHT_CUPTI_PATH"] = cupti_path()  # torch's, from its wheel
    environment.pop(SAMPLE_VARIABLE, None)
    environment.pop(SAMPLE_ROOT_VARIABLE, None)
    if options.sample is not None or options.sample_root is not None:
        try:
            rate = parse_sample_rate(options.sample if options.sample is not None else 1.0,
                                     "opsight run: --sample")
            root = parse_sample_root(options.sample_root, "opsight run: --sample-root")
        except ValueError as error:
            print(error, file=sys.stderr)
            return USAGE_ERROR
        environment[SAMPLE_VARIABLE] = repr(rate)
        if root:
            environment[SAMPLE_ROOT_VARIABLE] = root
    if options.production:
        _preset.apply("production", environment)
        options.ring = environment["OPSIGHT_RING"]
    elif "OPSIGHT_SAMPLE_MS" not in environment:
        environment["OPSIGHT_SAMPLE_MS"] = "100"
    if options.metrics:
        from .._capture.metrics import metric_problem

        names = [name for name in re.split(r"[,;\s]+", options.metrics) if name]
        problems = [problem for problem in map(metric_problem, names) if problem]
        if problems:
            print(f"opsight run: --metrics: {problems[0]}", file=sys.stderr)
            return USAGE_ERROR
        environment["OPSIGHT_METRICS"] = ",".join(names)
    for name in ("OPSIGHT_DUMP_ON_SLOW", "OPSIGHT_DUMP_DIR", "OPSIGHT_DUMP_ON_EXCEPTION"):
        environment.pop(name, None)
    if options.ring is None:
        environment.pop("OPSIGHT_RING", None)
    options.dump_directory = None
    if options.ring is None and (options.dump_on_slow or options.dump_dir
                                 or options.no_dump_on_exception):
        print("opsight run: --dump-on-slow, --dump-dir and --no-dump-on-exception need --ring",
              file=sys.stderr)
        return USAGE_ERROR
    if options.ring is not None:
        problem = _native.check_ring_options(options.ring, options.dump_on_slow or "")
        if problem:
            print(f"opsight run: {problem}", file=sys.stderr)
            return USAGE_ERROR
        if options.export_live or options.metrics_address is not None:
            print("opsight run: --ring keeps the recording in memory until a dump, so live "
                  "export and live /metrics would see nothing: use one or the other",
                  file=sys.stderr)
            return USAGE_ERROR
        options.dump_directory = os.path.abspath(
            options.dump_dir or os.path.splitext(options.output)[0] + "-dumps")
        environment["OPSIGHT_RING"] = options.ring
        environment["OPSIGHT_DUMP_DIR"] = options.dump_directory
        if options.dump_on_slow:
            environment["OPSIGHT_DUMP_ON_SLOW"] = options.dump_on_slow
        if options.no_dump_on_exception:
            environment["OPSIGHT_DUMP_ON_EXCEPTION"] = "0"
    options.program_command = command
    options.script = script
    keep_directory = True  # until the run's traces are safely written and stored
    try:
        status, keep_directory = _run_and_report(start_command, environment, run_directory,
                                                 options, views, _native)
        return status
    finally:
        if keep_directory and _has_traces(run_directory):
            print(f"opsight run: the processes' traces are kept in {run_directory} "
                  f"(opsight report {run_directory}/trace.*.opsight)", file=sys.stderr)
        else:
            shutil.rmtree(run_directory, ignore_errors=True)


def _formats_help() -> str:
    """".opsight (opsight native), .json (Chrome trace JSON) or .pftrace (Perfetto
    protobuf)": the formats a trace is written in, from the core's table."""
    named = [f"{format_['extensions'][0]} ({format_['description']})"
             for format_ in _native.trace_file_formats()]
    return ", ".join(named[:-1]) + " or " + named[-1]


def _output_problem(path: str) -> str | None:
    """Why the trace could not be written to ``path``, checked before the program runs."""
    if _native.trace_format_of_path(path) is None:
        return f"unknown trace format (use {_native.written_trace_extensions()})"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"no such folder: {directory}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"cannot write in {directory}"
    if os.path.isdir(path):
        return "is a folder"
    return None


def _sink_is_live(target: str) -> bool:
    """Whether ``opsight run --export-live`` streams the target (the core's sink table:
    spans, log records, otlp-metrics), rather than sending it once the program has ended."""
    kind = re.match(r"[a-z-]*", target).group(0)
    for sink in _native.export_sinks():
        if kind in sink["spellings"]:
            return sink.get("live", sink["payload"] == "spans")
    return True  # an unknown kind: the live exporter's check names it


def _trace_files(run_directory: str) -> list[str]:
    # A process killed while it started (a pool worker ended before it was needed) leaves
    # a file with no more than its header: nothing was recorded, nothing is lost.
    return [path for path in sorted(glob.glob(os.path.join(run_directory, "trace.*.opsight")))
            if os.path.getsize(path) > _NATIVE_HEADER_BYTES]


def _has_traces(run_directory: str) -> bool:
    return os.path.isdir(run_directory) and bool(_trace_files(run_directory))


def _run_and_report(start_command, environment, run_directory, options, views,
                    native) -> tuple[int, bool]:
    """Runs the program, then merges, reports, stores and writes its trace. Returns the
    exit status and whether the per-process traces must be kept (something failed)."""
    live = None
    if options.export_live and options.export_targets:
        # Spans and log records stream as the program writes them, otlp-metrics every
        # OTEL_METRIC_EXPORT_INTERVAL (and at the end); a Pushgateway target is sent once the
        # program has ended, as without --export-live.
        streamed = [target for target in options.export_targets if _sink_is_live(target)]
        try:
            live = native.LiveSpanExporter(run_directory, streamed, service=options.service)
        except ValueError as error:
            print(f"opsight run: --export: {error} (the program was not started)", file=sys.stderr)
            return USAGE_ERROR, False
        live.start()
        options.export_targets = [target for target in options.export_targets
                                  if target not in streamed]
    endpoint = None
    if options.metrics_address is not None:
        endpoint = native.MetricsEndpoint(run_directory)
        try:
            port = endpoint.start(*options.metrics_address)
        except RuntimeError as error:
            print(f"opsight run: --export prometheus: {error} (the program was not started)",
                  file=sys.stderr)
            if live is not None:
                live.stop(0.0)
            return USAGE_ERROR, False
        print(f"opsight run: live metrics on http://{options.metrics_address[0]}:{port}/metrics",
              file=sys.stderr)
    control = None
    if options.control_address is not None:
        from .control_server import start_control_server

        try:
            control, line = start_control_server(run_directory, options.control_address)
        except OSError as error:
            print(f"opsight run: --control-port: cannot listen: {error} (the program was not "
                  f"started)", file=sys.stderr)
            if endpoint is not None:
                endpoint.stop()
            if live is not None:
                live.stop(0.0)
            return USAGE_ERROR, False
        print(f"opsight run: {line}", file=sys.stderr)
    try:
        child = subprocess.Popen(start_command, env=environment)
    except OSError as error:
        print(f"opsight run: cannot start {start_command[0]!r}: {error}", file=sys.stderr)
        if control is not None:
            control.stop()
        if endpoint is not None:
            endpoint.stop()
        if live is not None:
            live.stop(0.0)
        return (127 if isinstance(error, FileNotFoundError) else 126), False
    # Ctrl-C reaches the program (same process group); opsight waits for it to finish.
    previous_interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
    previous_terminate = signal.signal(signal.SIGTERM, lambda number, frame: child.send_signal(number))
    try:
        status = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous_interrupt)
        signal.signal(signal.SIGTERM, previous_terminate)
    exit_status = status if status >= 0 else 128 - status
    if control is not None:
        control.stop()
    live_reports = []
    if live is not None:
        live_reports = live.stop(options.export_timeout)
        print_reports(live_reports, "opsight run")
    if endpoint is not None:
        endpoint.scrape()  # the files' last spans, for the scrapes that linger
        if options.metrics_linger > 0:
            time.sleep(options.metrics_linger)
        endpoint.stop()

    if options.dump_directory is not None:
        dumps = sorted(glob.glob(os.path.join(options.dump_directory, "*.dump-*.opsight")))
        if dumps:
            print(f"opsight run: flight recorder: {len(dumps)} dump(s) in "
                  f"{options.dump_directory} (opsight report {dumps[-1]})", file=sys.stderr)
    files = _trace_files(run_directory)
    if not files:
        print("opsight run: the program recorded nothing (is it a Python program run by the "
              "interpreter opsight is installed in?)", file=sys.stderr)
        return exit_status, False
    if _merges_streaming(files, options, native):
        return _stream_merge(files, options, views, native, exit_status, run_directory,
                             live_reports)
    try:
        trace = native.merge_trace_files(files, os.path.basename(options.output))
    except ValueError as error:
        print(f"opsight run: {error}", file=sys.stderr)
        _store_run(files, options)
        return exit_status or 1, True
    if trace.damage:
        print(f"opsight run: {trace.damage}", file=sys.stderr)
    # What the exports did goes into the run's info before anything reads it: the reports'
    # overhead line, the stored run and the written file all show it.
    for report in live_reports:
        trace.note_export(report["target"], report["spans"], report["sent"], report["dropped"])
    exit_reports = export_trace(trace, options.export_targets, prefix="opsight run",
                                service=options.service, timeout_s=options.export_timeout)
    exit_status = _status_after_exports(live_reports + exit_reports, exit_status, options)
    for view in views:
        sys.stderr.write(trace.render(view, options.format, "total", 0, options.max_roots))
        if options.format == "text":
            sys.stderr.write("\n")
    for source, reason in _merge_unresolved(run_directory):
        print(f"opsight: target never resolved: {source}: {reason}", file=sys.stderr)
    _store_run(files, options, trace)
    try:
        trace.write(options.output)
    except (RuntimeError, OSError) as error:
        print(f"opsight run: {error}", file=sys.stderr)
        return exit_status or 1, True
    info = trace.run_info()
    hint = f"opsight report {options.output} --tree"
    print(f"opsight run: wrote {options.output} ({info['slices']} spans, "
          f"{info['processes']} process{'es' if info['processes'] != 1 else ''}); {hint}",
          file=sys.stderr)
    return exit_status, False


# From this many bytes of per-process files, `--merge auto` streams (as `opsight report`
# streams inputs from 1 GiB: src/cli/main.cc, kStreamFromBytes).
_STREAM_MERGE_FROM_BYTES = 1 << 30


def _merges_streaming(files: list[str], options, native) -> bool:
    """Whether the processes' files are merged by native.merge_native_files (bounded memory)
    rather than read whole: --merge stream, or auto from _STREAM_MERGE_FROM_BYTES, when the
    output is .opsight and every export target streams from the files (a Pushgateway's is
    sent from the trace in memory)."""
    if options.merge == "whole":
        return False
    why_not = None
    held = [target for target in options.export_targets if not _sink_is_live(target)]
    if native.trace_format_of_path(options.output) != "native":
        why_not = "the output is not .opsight"
    elif held:
        why_not = f"{held[0]} is sent from the trace in memory"
    if options.merge == "stream":
        if why_not:
            print(f"opsight run: --merge stream: {why_not}: the files are merged in memory",
                  file=sys.stderr)
        return why_not is None
    return why_not is None and sum(os.path.getsize(path) for path in files) >= \
        _STREAM_MERGE_FROM_BYTES


def _export_from_files(run_directory: str, options, native) -> list[dict[str, Any]]:
    """Sends the run to the export targets once the program has ended, from the processes'
    files a window at a time (the live exporter, started late): what export_trace sends
    from the merged trace, in bounded memory. Prints and returns one report per target."""
    if not options.export_targets:
        return []
    try:
        exporter = native.LiveSpanExporter(run_directory, options.export_targets,
                                           service=options.service)
    except ValueError as error:  # checked before the program started; said if it changed
        print(f"opsight run: export: {error}", file=sys.stderr)
        return [{"target": " ".join(options.export_targets), "error": str(error), "sent": 0,
                 "dropped": None}]
    exporter.start()
    reports = exporter.stop(options.export_timeout)
    print_reports(reports, "opsight run")
    return reports


def _export_notes(reports: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The run-info pairs Trace.note_export writes for these reports ("export:<target>":
    "spans sent dropped"), for a merge that never holds the trace."""
    return [(f"export:{report['target']}",
             f"{report['spans']} {report['sent']} {report['dropped']}")
            for report in reports if report.get("dropped") is not None and "spans" in report]


def _status_after_exports(reports: list[dict[str, Any]], exit_status: int, options) -> int:
    """EXPORT_INCOMPLETE when an export dropped something and the program succeeded (unless
    --allow-export-drops), with a line saying what; else the program's status."""
    dropped_items: dict[str, int] = {}  # "span", "log record" -> how many were dropped
    for report in reports:
        if report.get("dropped"):
            item = report.get("item", "span")
            dropped_items[item] = dropped_items.get(item, 0) + report["dropped"]
    if dropped_items and exit_status == OK and not options.allow_export_drops:
        what = " and ".join(f"{count} {item}{'s' if count != 1 else ''}"
                            for item, count in dropped_items.items())
        print(f"opsight run: an export dropped {what}: "
              f"exit status {EXPORT_INCOMPLETE} (--allow-export-drops keeps the program's)",
              file=sys.stderr)
        return EXPORT_INCOMPLETE
    return exit_status


def _stream_merge(files, options, views, native, exit_status, run_directory,
                  live_reports) -> tuple[int, bool]:
    """Exports the run from its files (_export_from_files), merges them into the output in
    bounded memory with what the exports did in its run info, saves the merged file in the
    run store as it is, then prints the reports that stream (summary, table) from it; the
    tree, which holds the whole trace, is left out with a line saying how to get it."""
    exit_reports = _export_from_files(run_directory, options, native)
    reports = live_reports + exit_reports
    exit_status = _status_after_exports(reports, exit_status, options)
    try:
        damage = native.merge_native_files(files, options.output, _export_notes(reports))
    except ValueError as error:
        print(f"opsight run: {error}", file=sys.stderr)
        return exit_status or 1, True
    except RuntimeError as error:
        print(f"opsight run: {error}", file=sys.stderr)
        return exit_status or 1, True
    if damage:
        more = len(damage) - 1
        print(f"opsight run: {damage[0]}" + (f" (and {more} more file{'s' if more > 1 else ''} "
              "like it)" if more else ""), file=sys.stderr)
    from .._core_command import core_command_path

    streamed = [view for view in views if view in ("summary", "table")]
    for view in streamed:
        sys.stderr.flush()
        result = subprocess.run([core_command_path(), "report", options.output, f"--{view}",
                                 "--stream", "on", "--format", options.format,
                                 "--max-roots", str(options.max_roots)],
                                stdout=sys.stderr, check=False)
        if result.returncode not in (0, 2):  # 2: damaged, what was read is shown
            print(f"opsight run: the {view} report failed (exit status {result.returncode})",
                  file=sys.stderr)
    left_out = [view for view in views if view not in streamed]
    if left_out:
        print(f"opsight run: the merge streamed: the {' and '.join(left_out)} report reads the "
              f"whole trace (opsight report {options.output} --{left_out[0]})", file=sys.stderr)
    for source, reason in _merge_unresolved(run_directory):
        print(f"opsight: target never resolved: {source}: {reason}", file=sys.stderr)
    _store_run([options.output], options, streaming=True)
    print(f"opsight run: wrote {options.output} ({len(files)} process file"
          f"{'s' if len(files) != 1 else ''} merged streaming); "
          f"opsight report {options.output} --summary", file=sys.stderr)
    return exit_status, False


def _store_run(files: list[str], options, trace: Any = None,
               streaming: bool = False) -> dict | None:
    """Saves the run in the run store (unless --no-store): the merged ``trace`` (with what
    its exports did), the per-process ``files`` when they could not be merged, or (with
    ``streaming``) the one merged file as it is; None if it was not saved."""
    if options.no_store:
        return None
    command = options.program_command
    module = command[2] if len(command) > 2 and command[1] == "-m" else None
    name = options.name or module or os.path.basename(options.script or command[0])
    return save_run(None if trace is not None else files, trace=trace, name=name,
                    tags=options.tag, command=shlex.join(command), store=options.store,
                    prefix="opsight run", streaming=streaming)
