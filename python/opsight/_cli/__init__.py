"""The ``opsight`` command.

``run``, ``ctl``, ``bench``, ``compare-backends``, ``demo``, ``explain`` and ``model`` are
Python's (they start, steer, time or explain Python programs and models; ``bench``,
``compare-backends`` and ``demo`` live in their features' packages); the core's commands
(``report``, ``compare``, ``convert``...: their list and help lines are the core's,
``src/cli/commands.hpp``) and ``--version`` are the C++ command installed inside the package
(``opsight/bin/opsight``), which this one replaces itself with.

Modules: ``run`` (``opsight run``), ``ctl`` (``opsight ctl``), ``explain`` (``opsight
explain``), ``model`` (``opsight model``), ``arguments`` (argparse exiting 64). Library
code never imports this package.

Exit statuses: one table for every command, in :mod:`opsight.exit_codes`.
"""

from __future__ import annotations

import sys

from .. import _native
from .._core_command import exec_core
from ..exit_codes import USAGE_ERROR

#: The Python half's commands, each with its lines of the overview help (a line after the
#: first is indented); the C++ half's come from the core (``src/cli/commands.hpp``).
_PYTHON_COMMANDS_HELP = (
    ("run", "Trace an unchanged program: opsight run -c targets.yaml -- python app.py ARGS"),
    ("ctl", "Switch tracing of a running traced process: opsight ctl PID on|off|status, "
            "opsight ctl list"),
    ("bench", "Benchmark a model (TorchScript, ONNX, module:factory) on a back-end and scenario:\n"
              "opsight bench model.onnx --backend ort-cpu --scenario server --qps 100 "
              "(docs/bench.md)"),
    ("explain", "Where and why torch.compile breaks models' graphs, as a CI gate with metrics:\n"
                "opsight explain mymodels:make_model, opsight explain --zoo zoo.yaml "
                "(docs/explain.md)"),
    ("model", "Print a model's structure: folded repeated blocks, parameters, frozen layers, "
              "shapes\nand, given a profile, each module's latency: opsight model "
              "mymodels:make_model"),
    ("compare-backends", "Time a torch function on several back-ends, graph by graph, with cost "
                         "per\nrequest: opsight compare-backends mymodels:make_predict "
                         "--backends eager,inductor"),
    ("demo", "Profile and benchmark a small BERT-style model (--quickstart: the C++ example)"),
)

#: The commands the C++ core runs (``opsight/bin/opsight``), as the core lists them; the
#: others are Python's.
CORE_COMMANDS = tuple(name for name, _ in _native.core_commands())
PYTHON_COMMANDS = tuple(name for name, _ in _PYTHON_COMMANDS_HELP)


def _help() -> str:
    """``opsight --help``: Python's commands, then the core's, one entry each."""
    lines = ["usage: opsight COMMAND [ARGS...]", "", "Commands:"]
    for name, text in (*_PYTHON_COMMANDS_HELP, *_native.core_commands()):
        first, *rest = text.split("\n")
        lines.append(f"  {name.ljust(8)} {first}" if len(name) <= 8 else f"  {name}  {first}")
        lines.extend(" " * 11 + line for line in rest)
    lines += ["", "opsight COMMAND --help shows a command's options; opsight --version its version."]
    return "\n".join(lines) + "\n"


def main(arguments: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if arguments is None else arguments
    if not arguments or arguments[0] in ("-h", "--help", "help"):
        print(_help(), end="")
        return 0 if arguments else USAGE_ERROR
    command = arguments[0]
    if command not in CORE_COMMANDS and command not in PYTHON_COMMANDS and command != "--version":
        print(f"opsight: unknown command {command!r}\n", file=sys.stderr)
        print(_help(), end="", file=sys.stderr)
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
