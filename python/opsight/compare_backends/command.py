"""``opsight compare-backends MODULE:FUNCTION``: the command line around
:func:`compare_backends` (arguments, loading the factory, prices, text or JSON output)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Callable

from ..exit_codes import USAGE_ERROR
from ..models import error_text
from .backends import DEFAULT_BACKENDS, resolve_backends, stdout_to_stderr
from .measure import compare_backends


class _UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsight compare-backends",
        description="Time a function on several back-ends, graph by graph (torch.compile "
                    "graphs and the Python between them), with totals and cost per million "
                    "calls. MODULE:FUNCTION names a callable that returns (fn, example_inputs).",
        epilog="Example: opsight compare-backends mymodels:make_predict --backends "
               "eager,inductor,onnxruntime --repeats 20 --price inductor=0.126 --format json")
    parser.add_argument("factory", metavar="MODULE:FUNCTION",
                        help="a module (importable, or a .py file) and a callable in it "
                             "returning (fn, example_inputs)")
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS),
                        help="comma-separated back-ends (default: %(default)s; also any "
                             "torch.compile back-end name)")
    parser.add_argument("--repeats", type=int, default=10, help="measured calls (default: 10)")
    parser.add_argument("--warmups", type=int, default=1,
                        help="discarded calls first (default: 1)")
    parser.add_argument("--price", action="append", default=[], metavar="BACKEND=USD_PER_HOUR",
                        help="price per hour of a back-end, for the cost per million calls "
                             "(repeatable)")
    parser.add_argument("--threads", type=int,
                        help="intra-op threads of torch and ONNX Runtime (default: theirs)")
    parser.add_argument("--rtol", type=float, default=1e-3,
                        help="relative tolerance of the output check")
    parser.add_argument("--atol", type=float, default=1e-5,
                        help="absolute tolerance of the output check")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    remote = parser.add_argument_group(
        "other machines' hardware, through Ray (docs/remote.md)")
    remote.add_argument("--cluster", metavar="ADDRESS",
                        help="run the graphs on a Ray cluster (ray://HOST:PORT, HOST:PORT, auto, "
                             "or local); --backends are then HARDWARE/BACKEND, e.g. "
                             "cpu-large/ort-cpu,gpu-a10/torchscript")
    remote.add_argument("--prices", metavar="FILE",
                        help="price table (YAML) per hardware label, e.g. "
                             "examples/remote/prices.yaml")
    remote.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                        help="a back-end's measurement bound (default: %(default)s)")
    remote.add_argument("--no-store", action="store_true",
                        help="do not save the merged run in the run store")
    remote.add_argument("--store", metavar="PATH", help="run store file")
    remote.add_argument("--name", help="name of the stored run")
    return parser


def _load_factory(spec: str) -> Callable[[], Any]:
    """The factory MODULE:FUNCTION names, by the loader of every model tool."""
    from ..models import loading

    try:
        return loading.load_factory(spec)[0]
    except loading.FactoryError as error:
        raise _UsageError(str(error)) from None


def _parse_prices(items: list[str], names: list[str]) -> dict[str, float]:
    prices = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise _UsageError(f"--price {item!r}: expected BACKEND=USD_PER_HOUR")
        if name not in names:
            raise _UsageError(f"--price {item!r}: {name!r} is not one of --backends "
                              f"({', '.join(names)})")
        try:
            price = float(value)
        except ValueError:
            raise _UsageError(f"--price {item!r}: {value!r} is not a number") from None
        if not math.isfinite(price) or price < 0:
            raise _UsageError(f"--price {item!r}: the price must be a number >= 0")
        prices[name] = price
    return prices


def command_main(arguments: list[str]) -> int:
    """``opsight compare-backends``: exit 0 ok, 1 the function or a capture failed,
    64 bad usage (the message names what is wrong)."""
    parser = _parser()
    try:
        options = parser.parse_args(arguments)
    except SystemExit as exit_:  # argparse: --help (0) or bad usage, message printed
        return 0 if not exit_.code else USAGE_ERROR
    prefix = "opsight compare-backends"
    if options.cluster:
        print(f"{prefix}: --cluster is run by the opsight command "
              "(opsight compare-backends ... --cluster ADDRESS)", file=sys.stderr)
        return USAGE_ERROR
    try:
        if options.repeats < 1:
            raise _UsageError(f"--repeats {options.repeats}: must be >= 1")
        if options.warmups < 0:
            raise _UsageError(f"--warmups {options.warmups}: must be >= 0")
        if options.threads is not None and options.threads < 1:
            raise _UsageError(f"--threads {options.threads}: must be >= 1")
        names = [name.strip() for name in options.backends.split(",") if name.strip()]
        if not names:
            raise _UsageError("--backends: no back-end given")
        if len(set(names)) != len(names):
            raise _UsageError(f"--backends {options.backends!r}: a back-end is given twice")
        prices = _parse_prices(options.price, names)
        try:
            import torch  # noqa: F401
        except ImportError:
            print(f"{prefix}: torch is not installed (pip install torch)", file=sys.stderr)
            return 1
        try:
            resolve_backends(names)
        except ValueError as error:
            raise _UsageError(f"--backends: {str(error).removeprefix('compare_backends: ')}") \
                from None
        factory = _load_factory(options.factory)
    except _UsageError as error:
        parser.print_usage(sys.stderr)
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    # What the program and torch print (the ONNX exporter prints failed graphs on fd 1)
    # goes to stderr: stdout carries the report alone, so that --format json parses.
    with stdout_to_stderr():
        try:
            made = factory()
        except Exception as error:  # noqa: BLE001
            print(f"{prefix}: {options.factory} raised {error_text(error)}", file=sys.stderr)
            return 1
        if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])):
            parser.print_usage(sys.stderr)
            print(f"{prefix}: error: {options.factory} must return (fn, example_inputs), got "
                  f"{type(made).__name__}", file=sys.stderr)
            return USAGE_ERROR
        fn, example_inputs = made
        try:
            result = compare_backends(fn, example_inputs, names, repeats=options.repeats,
                                      warmups=options.warmups, prices_per_hour=prices,
                                      rtol=options.rtol, atol=options.atol,
                                      threads=options.threads)
        except Exception as error:  # noqa: BLE001 - fn itself (or dynamo) failed
            print(f"{prefix}: running the function failed: {error_text(error)}",
                  file=sys.stderr)
            return 1
    if options.format == "json":
        json.dump(result.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        result.print()
    return 0


if __name__ == "__main__":
    sys.exit(command_main(sys.argv[1:]))
