"""``opsight bench MODEL``: the command line over :func:`opsight.bench.run` (docs/bench.md).

Exit status, as every opsight command: 0 ok; 1 unusable input (the model cannot be loaded or
run on the back-end, the output cannot be written: the message names it); 3 a check asked
for failed (the server scenario's p99 bound was not held, as `opsight compare
--fail-on-regression` exits 3 on a regression); 64 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..exit_codes import ERROR, REGRESSION, USAGE_ERROR


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 64 (usage), as every opsight command
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    from ..models import BACKEND_ALIASES, BACKENDS
    from .scenarios import SCENARIOS

    result = _Parser(
        prog="opsight bench",
        description="Benchmark a model on a back-end under an MLPerf-style scenario: latency "
                    "percentiles, the phases of a query, throughput, top operators. The run is "
                    "saved in the run store. For LLM token generation (TTFT, ITL, TPOT, "
                    "goodput) see opsight bench --generate --help (docs/llm.md).",
        epilog="MODEL: a TorchScript file (.pt, .ts), an ONNX file (.onnx), or module:factory / "
               "path/to/file.py:factory (a callable returning (model, example_inputs) or "
               "opsight.bench.Model(...)). Examples: opsight bench mlp.onnx --backend ort-cpu "
               "--threads 1;  opsight bench models.py:make --backend compile --scenario server "
               "--qps 200 --p99-bound-ms 10 --duration 10s")
    result.add_argument("model", metavar="MODEL")
    result.add_argument("--backend", choices=(*BACKENDS, *BACKEND_ALIASES), metavar="BACKEND",
                        help=f"{', '.join(BACKENDS)} (aliases: "
                             + ", ".join(f"{alias}={name}" for alias, name in BACKEND_ALIASES.items())
                             + "); default: eager for module:factory, torchscript for a "
                               "TorchScript file, ort-cpu for an ONNX file")
    result.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="device of the PyTorch back-ends (default: %(default)s)")
    result.add_argument("--compile-backend", default="inductor",
                        help="torch.compile's backend for --backend compile (default: %(default)s)")
    result.add_argument("--compile-mode", help="torch.compile's mode (e.g. reduce-overhead)")
    result.add_argument("--scenario", choices=SCENARIOS, default="single-stream",
                        help="default: %(default)s")
    result.add_argument("--threads", type=int,
                        help="intra-op threads (torch.set_num_threads, ONNX Runtime "
                             "intra_op_num_threads)")
    result.add_argument("--batch-size", type=int, default=1,
                        help="repeat the example inputs this many times along dimension 0")
    result.add_argument("--warmup", default="10",
                        help="warm-up: iterations (10) or a duration (2s) (default: %(default)s)")
    result.add_argument("--iterations", type=int,
                        help="timed queries (default 100 unless --duration is given)")
    result.add_argument("--duration", help="time the queries for this long (10s, 500ms)")
    result.add_argument("--qps", type=float, help="server scenario: Poisson arrival rate")
    result.add_argument("--p99-bound-ms", type=float,
                        help="server scenario: the p99 latency bound; exit 3 when it is not held")
    result.add_argument("--seed", type=int, default=0, help="server scenario: arrivals' seed")
    result.add_argument("--workers", type=int, default=1,
                        help="offline and server scenarios: threads serving the queries "
                             "(default: %(default)s)")
    result.add_argument("--shape", action="append", default=None, metavar="[NAME=]1x3x224x224",
                        help="input shape (repeatable, one per input): needed for a TorchScript "
                             "file; overrides an ONNX model's declared shapes")
    result.add_argument("--dtype", default="float32", help="dtype of --shape inputs")
    result.add_argument("--profile-iterations", type=int, default=5,
                        help="queries profiled after the timed ones for the top operators "
                             "(0: none; default: %(default)s)")
    result.add_argument("--top", type=int, default=10, help="operators shown (default: %(default)s)")
    result.add_argument("--format", choices=("text", "json", "csv"), default="text")
    result.add_argument("-o", "--output", help="write the report to this file, not stdout")
    result.add_argument("--trace", metavar="FILE",
                        help="also write the timed queries' trace: Chrome JSON (.json), Perfetto "
                             "protobuf (.pftrace) or opsight's format (.opsight)")
    progress = result.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="show a progress bar on stderr (default: when stderr is a "
                               "terminal and the run lasts over a second)")
    progress.add_argument("--no-progress", dest="progress", action="store_false")
    result.add_argument("--name", help="name of the stored run (default: bench MODEL-NAME)")
    result.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="tag the stored run (repeatable)")
    result.add_argument("--no-store", action="store_true", help="do not save the run in the run store")
    result.add_argument("--store", metavar="PATH",
                        help="run store file (default: $OPSIGHT_HOME/runs.db, else ~/.opsight/runs.db)")
    remote = result.add_argument_group(
        "other machines' hardware, through Ray (docs/remote.md)")
    remote.add_argument("--cluster", metavar="ADDRESS",
                        help="run on a Ray cluster: ray://HOST:PORT, HOST:PORT, auto, or local "
                             "(a Ray instance on this machine); needs --on")
    remote.add_argument("--on", action="append", default=[], metavar="HARDWARE[/BACKEND]",
                        help="a hardware label (a Ray custom resource of the nodes) and a "
                             "back-end (default --backend), e.g. cpu-large/ort-cpu; repeatable "
                             "or comma-separated; the back-ends run in parallel, one at a time "
                             "per node")
    remote.add_argument("--prices", metavar="FILE",
                        help="price table (YAML) for the cost per million queries, e.g. "
                             "examples/remote/prices.yaml")
    remote.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="a back-end's measurement bound (default: %(default)s); beyond it "
                             "its worker is killed and its row is an error")
    return result


def main(arguments: list[str]) -> int:
    if "--generate" in arguments:  # token generation: opsight.llm (docs/llm.md)
        from ..llm.command import main as generate_main
        return generate_main(arguments)
    options = parser().parse_args(arguments)
    if options.cluster or options.on:
        print("opsight bench: --cluster and --on are run by the opsight command "
              "(opsight bench MODEL --cluster ADDRESS --on HARDWARE/BACKEND)", file=sys.stderr)
        return USAGE_ERROR
    from . import BenchError, run

    for tag in options.tag:
        if not tag.partition("=")[0]:
            print(f"opsight bench: --tag {tag!r}: expected KEY=VALUE or KEY", file=sys.stderr)
            return USAGE_ERROR
    warmup: int | str = options.warmup
    if warmup.strip().isdigit():
        warmup = int(warmup)
    progress = options.progress
    if progress is None:
        progress = sys.stderr.isatty()
    # A module:factory names a module found from the current directory, as `python -m` does.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        result = run(
            options.model, backend=options.backend, scenario=options.scenario,
            batch_size=options.batch_size, threads=options.threads, warmup=warmup,
            iterations=options.iterations, duration=options.duration, qps=options.qps,
            p99_bound_ms=options.p99_bound_ms, device=options.device,
            compile_backend=options.compile_backend, compile_mode=options.compile_mode,
            shapes=options.shape, dtype=options.dtype,
            profile_iterations=options.profile_iterations,
            store=False if options.no_store else (options.store or True),
            name=options.name, tags=options.tag, progress=progress, seed=options.seed,
            workers=options.workers)
    except BenchError as error:
        print(f"opsight bench: {error}", file=sys.stderr)
        return ERROR
    except ValueError as error:
        print(f"opsight bench: {error}", file=sys.stderr)
        return USAGE_ERROR
    if options.trace:
        try:
            result.write_trace(options.trace)
        except (OSError, RuntimeError) as error:
            print(f"opsight bench: cannot write {options.trace}: {error}", file=sys.stderr)
            return ERROR
    text = result.render(options.format, top=options.top)
    if options.output:
        try:
            with open(options.output, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as error:
            print(f"opsight bench: cannot write {options.output}: {error}", file=sys.stderr)
            return ERROR
        print(f"opsight bench: wrote {options.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if not result.passed:
        print(f"opsight bench: the p99 bound of {options.p99_bound_ms:g} ms was not held",
              file=sys.stderr)
        return REGRESSION
    return 0
