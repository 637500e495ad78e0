"""The ``opsight`` command.

``run``, ``ctl``, ``bench``, ``compare-backends``, ``demo``, ``explain`` and ``model`` are
Python's (they start, steer, time or explain Python programs and models; ``bench``,
``compare-backends`` and ``demo`` live in their features' packages); every other
command (``report``, ``compare``, ``export``, ``convert``, ``save``, ``runs``, ``show``, ``rm``,
``--version``) is the C++ command installed inside the package (``opsight/bin/opsight``),
which this one replaces itself with.

Modules: ``run`` (``opsight run``), ``ctl`` (``opsight ctl``), ``explain`` (``opsight
explain``), ``model`` (``opsight model``), ``arguments`` (argparse exiting 64). Library
code never imports this package.

Exit statuses: one table for every command, in :mod:`opsight.exit_codes`.
"""

from __future__ import annotations

import sys

from .._core_command import exec_core
from ..exit_codes import USAGE_ERROR

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
  explain  Where and why torch.compile breaks models' graphs, as a CI gate with metrics:
           opsight explain mymodels:make_model, opsight explain --zoo zoo.yaml (docs/explain.md)
  model    Print a model's structure: folded repeated blocks, parameters, frozen layers, shapes
           and, given a profile, each module's latency: opsight model mymodels:make_model
  compare-backends  Time a torch function on several back-ends, graph by graph, with cost per
           request: opsight compare-backends mymodels:make_predict --backends eager,inductor
  export   Send runs to OpenTelemetry (OTLP/HTTP), Zipkin or a Pushgateway:
           opsight export latest --to otlp=http://127.0.0.1:4318 (docs/export.md)
  devices  List the GPUs: memory, utilization, temperature, power, health (docs/devices.md)
  convert  Convert between .opsight, Chrome JSON and Perfetto protobuf (.pftrace)
  demo     Profile and benchmark a small BERT-style model (--quickstart: the C++ example)
  save     Store trace file(s) as a run in the run store ($OPSIGHT_HOME, default ~/.opsight)
  runs     List the stored runs: --name GLOB, --tag K[=V], --since 7d, --format json
  show     Show a stored run's metadata and report: opsight show latest --tree
  rm       Remove stored runs: opsight rm RUN..., --keep-last N, --older-than 30d
  ui       The web UI over the stored runs (or trace files): runs, overview, timeline,
           call tree / flame graph, compare: opsight ui [RUN | FILE...] --open (docs/ui.md)

opsight COMMAND --help shows a command's options; opsight --version its version.
"""


#: The commands the C++ core runs (``opsight/bin/opsight``); the others are Python's.
CORE_COMMANDS = ("report", "compare", "export", "devices", "convert", "save", "runs", "show",
                 "rm", "ui")
PYTHON_COMMANDS = ("run", "ctl", "bench", "compare-backends", "demo", "explain", "model")


def main(arguments: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if arguments is None else arguments
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(HELP, end="")
        return 0 if arguments else USAGE_ERROR
    command = arguments[0]
    if command not in CORE_COMMANDS and command not in PYTHON_COMMANDS and command != "--version":
        print(f"opsight: unknown command {command!r}\n", file=sys.stderr)
        print(HELP, end="", file=sys.stderr)
        return USAGE_ERROR
    if command == "run":
        from .run import run_command
        return run_command(arguments[1:])
    if command == "ctl":
        from .ctl import ctl_command
        return ctl_command(arguments[1:])
    if arguments[0] == "demo":  # the real-model demo; --quickstart runs the C++ one
        from ..demo import main as demo_main
        return demo_main(arguments[1:])
    if arguments[0] in ("bench", "compare-backends") and _remote(arguments[1:]):  # docs/remote.md
        from ..remote.command import main as remote_main
        return remote_main(arguments[0], arguments[1:])
    if arguments[0] == "bench":  # docs/bench.md
        from ..bench.command import main as bench_main
        return bench_main(arguments[1:])
    if arguments[0] == "compare-backends":  # docs/torch.md
        from ..compare_backends.command import command_main as compare_backends_main
        return compare_backends_main(arguments[1:])
    if arguments[0] == "explain":  # docs/explain.md
        from .explain import command_main as explain_main
        return explain_main(arguments[1:])
    if arguments[0] == "model":  # docs/explain.md
        from .model import command_main as model_main
        return model_main(arguments[1:])
    return exec_core(arguments)


if __name__ == "__main__":
    sys.exit(main())


def _remote(arguments: list[str]) -> bool:
    """Whether a bench or compare-backends command line asks for a Ray cluster (--cluster,
    or bench's --on): then opsight.remote runs it (docs/remote.md)."""
    return any(argument in ("--cluster", "--on") or argument.startswith(("--cluster=", "--on="))
               for argument in arguments if argument != "--")
