"""``opsight bench MODEL --cluster ADDRESS --on HARDWARE/BACKEND`` and ``opsight
compare-backends MODULE:FUNCTION --cluster ADDRESS --backends HARDWARE/BACKEND,...``: the
command lines of :mod:`.bench` and :mod:`.compare`. Their options are the local commands'
(the same parsers), plus ``--cluster``, ``--on``, ``--prices`` and ``--timeout``.

Exit status: 0 every back-end ran; 1 a back-end failed (its row says why) or the cluster,
model or price table cannot be used (one line names it); 3 a server scenario's p99 bound
was not held; 64 bad usage."""

from __future__ import annotations

import os
import sys

from ..exit_codes import ERROR, REGRESSION, USAGE_ERROR
from ..models import ModelError, error_text
from .specs import RemoteError, SpecError


def main(command: str, arguments: list[str]) -> int:
    if command == "bench":
        return bench_main(arguments)
    return compare_main(arguments)


def bench_main(arguments: list[str]) -> int:
    from ..bench.command import parser
    from .bench import run

    options = parser().parse_args(arguments)
    prefix = "opsight bench"
    if not options.cluster or not options.on:
        print(f"{prefix}: --cluster ADDRESS and --on HARDWARE[/BACKEND] go together "
              "(docs/remote.md)", file=sys.stderr)
        return USAGE_ERROR
    if options.format == "csv" or options.trace:
        print(f"{prefix}: with --cluster the report is text or json, and the trace is the "
              "stored run's (opsight convert RUN FILE)", file=sys.stderr)
        return USAGE_ERROR
    warmup: int | str = options.warmup
    if warmup.strip().isdigit():
        warmup = int(warmup)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        result = run(
            options.model, options.on, cluster=options.cluster, backend=options.backend,
            shapes=options.shape, dtype=options.dtype, batch_size=options.batch_size,
            prices=options.prices, timeout_s=options.timeout,
            progress=options.progress is not False,
            store=False if options.no_store else (options.store or True), name=options.name,
            tags=options.tag, scenario=options.scenario, threads=options.threads,
            warmup=warmup, iterations=options.iterations, duration=options.duration,
            qps=options.qps, p99_bound_ms=options.p99_bound_ms, device=options.device,
            compile_backend=options.compile_backend, compile_mode=options.compile_mode,
            profile_iterations=options.profile_iterations, seed=options.seed,
            workers=options.workers)
    except (SpecError, ValueError, TypeError) as error:
        print(f"{prefix}: {error}", file=sys.stderr)
        return USAGE_ERROR
    except (RemoteError, ModelError) as error:
        print(f"{prefix}: {error}", file=sys.stderr)
        return ERROR
    text = result.render(options.format)
    if not _write(text, options.output, prefix):
        return ERROR
    if result.failed:
        return ERROR
    bound_missed = [row for row in result.rows if row.result and row.result.get("server")
                    and row.result["server"].get("p99_bound_held") is False]
    return REGRESSION if bound_missed else 0


def compare_main(arguments: list[str]) -> int:
    from ..compare_backends.backends import stdout_to_stderr
    from ..compare_backends.command import _load_factory, _parser, _UsageError
    from .compare import compare_backends_remote

    parser = _parser()
    try:
        options = parser.parse_args(arguments)
    except SystemExit as exit_:
        return 0 if not exit_.code else USAGE_ERROR
    prefix = "opsight compare-backends"
    try:
        if options.repeats < 1 or options.warmups < 0:
            raise _UsageError("--repeats must be >= 1 and --warmups >= 0")
        if options.price:
            raise _UsageError("--price is per back-end on this machine; with --cluster give "
                              "a price table per hardware label: --prices FILE")
        factory = _load_factory(options.factory)
    except _UsageError as error:
        parser.print_usage(sys.stderr)
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    with stdout_to_stderr():
        try:
            made = factory()
        except Exception as error:  # noqa: BLE001
            print(f"{prefix}: {options.factory} raised {error_text(error)}", file=sys.stderr)
            return ERROR
        if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])):
            print(f"{prefix}: error: {options.factory} must return (fn, example_inputs)",
                  file=sys.stderr)
            return USAGE_ERROR
        fn, example_inputs = made
        try:
            result = compare_backends_remote(
                fn, example_inputs, options.backends, cluster=options.cluster,
                repeats=options.repeats, warmups=options.warmups, prices=options.prices,
                rtol=options.rtol, atol=options.atol, threads=options.threads,
                timeout_s=options.timeout, progress=True,
                store=False if options.no_store else (options.store or True),
                name=options.name)
        except (SpecError, ValueError) as error:
            print(f"{prefix}: {error}", file=sys.stderr)
            return USAGE_ERROR
        except RemoteError as error:
            print(f"{prefix}: {error}", file=sys.stderr)
            return ERROR
        except Exception as error:  # noqa: BLE001 - fn itself (or dynamo) failed
            print(f"{prefix}: running the function failed: {error_text(error)}",
                  file=sys.stderr)
            return ERROR
    if options.format == "json":
        import json
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    else:
        text = result.table()
    sys.stdout.write(text)
    sys.stdout.flush()
    return ERROR if any(not outcome.ok for outcome in result.outcomes) else 0


def _write(text: str, output: str | None, prefix: str) -> bool:
    if not output:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    try:
        with open(output, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        print(f"{prefix}: cannot write {output}: {error}", file=sys.stderr)
        return False
    print(f"{prefix}: wrote {output}", file=sys.stderr)
    return True
