"""``opsight model FILE_OR_FACTORY``: print a model's folded tree (:func:`opsight.print_model`,
:mod:`opsight.model_view`).

FILE_OR_FACTORY is a ``module:factory`` or ``file.py:factory`` returning a module or
``(module, example_inputs)`` (then the shapes of one forward are shown), or a TorchScript
file. ``--profile RUN|FILE`` adds each module's latency from a stored run or trace file;
``--profile-runs N`` records one here: N forwards on the example inputs with module tracing.

Exit statuses: 0 printed; 1 the model could not be loaded or run; 64 bad usage."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .arguments import parse_arguments
from ..exit_codes import ERROR, OK, USAGE_ERROR

PREFIX = "opsight model"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsight model",
        description="A model's structure: repeated blocks folded, parameters, frozen layers, "
                    "dtypes, shapes and per-module latency (docs/explain.md).")
    parser.add_argument("model", metavar="FILE_OR_FACTORY",
                        help="module:factory or file.py:factory (a module or (module, inputs)), "
                             "or a TorchScript file")
    parser.add_argument("--depth", type=int, default=None, help="levels shown (default all)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--ascii", action="store_true", help="ASCII marks and tree lines")
    parser.add_argument("--profile", metavar="RUN|FILE",
                        help="latencies from a stored run or trace file with module spans")
    parser.add_argument("--profile-runs", type=int, default=0, metavar="N",
                        help="record N forwards on the example inputs and show their latencies")
    parser.add_argument("--store", default=None, metavar="PATH", help="the run store")
    return parser


class _LoadError(Exception):
    pass


def _load(spec: str) -> tuple[Any, Any]:
    try:
        import torch
    except ImportError:
        raise _LoadError("torch is not installed (pip install torch)") from None
    where, colon, attribute = spec.rpartition(":")
    if not colon and os.path.isfile(spec):
        try:
            return torch.jit.load(spec, map_location="cpu"), None
        except Exception as error:  # noqa: BLE001 - not TorchScript
            raise _LoadError(f"{spec}: not a TorchScript file ({type(error).__name__}: "
                             f"{str(error).strip().splitlines()[0] if str(error).strip() else ''})"
                             ) from None
    if not colon:
        raise _LoadError(f"{spec}: no such file, and not module:factory or file.py:factory")
    from ..models import ModelError, call_factory

    try:
        made, _ = call_factory(spec)
    except ModelError as error:
        raise _LoadError(str(error)) from None
    if isinstance(made, (tuple, list)) and len(made) == 2:
        model, inputs = made
    else:
        model, inputs = made, None
    if not isinstance(model, torch.nn.Module):
        raise _LoadError(f"{spec}: the factory must return an nn.Module or (module, "
                         f"example_inputs), got {type(model).__name__}")
    return model, inputs


def command_main(arguments: list[str]) -> int:
    parser = _parser()
    options, status = parse_arguments(parser, arguments)
    if options is None:
        return status
    if options.depth is not None and options.depth < 0:
        parser.print_usage(sys.stderr)
        print(f"{PREFIX}: error: --depth {options.depth}: must be >= 0", file=sys.stderr)
        return USAGE_ERROR
    if options.profile and options.profile_runs:
        parser.print_usage(sys.stderr)
        print(f"{PREFIX}: error: give --profile or --profile-runs, not both", file=sys.stderr)
        return USAGE_ERROR
    try:
        model, inputs = _load(options.model)
    except _LoadError as error:
        print(f"{PREFIX}: {error}", file=sys.stderr)
        return ERROR
    if options.profile_runs and inputs is None:
        print(f"{PREFIX}: --profile-runs needs example inputs: the factory must return "
              "(module, example_inputs)", file=sys.stderr)
        return USAGE_ERROR
    from ..model_view import model_tree
    from ..model_view.render import prune, render_text

    try:
        profile = options.profile
        if options.profile_runs:
            profile = _record_profile(model, inputs, options.profile_runs)
        root = model_tree(model, inputs=inputs, profile=profile, store=options.store)
    except Exception as error:  # noqa: BLE001 - the model's own failure, or a bad profile
        print(f"{PREFIX}: {options.model}: {type(error).__name__}: {error}", file=sys.stderr)
        return ERROR
    if options.format == "json":
        import json
        sys.stdout.write(json.dumps(prune(root, options.depth), indent=2) + "\n")
    else:
        from ..model_view import wants_ascii
        sys.stdout.write(render_text(root, depth=options.depth,
                                     ascii=options.ascii or wants_ascii(sys.stdout)))
    return OK


def _record_profile(model: Any, inputs: Any, runs: int) -> Any:
    """``runs`` forwards under ``opsight.profile()`` with module tracing only."""
    import torch

    import opsight
    import opsight.torch as opsight_torch

    from ..models import split_inputs

    args, kwargs = split_inputs(inputs)
    model.eval()
    with torch.no_grad():
        model(*args, **kwargs)  # warm-up, not recorded
        with opsight_torch.tracing(operators=False, modules=True), \
                opsight.profile() as recorded:
            for _ in range(runs):
                model(*args, **kwargs)
    return recorded
