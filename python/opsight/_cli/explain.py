"""``opsight explain``: arguments, running the models (:mod:`opsight.explain.runner`), the
report, the run store, the CI gate (:mod:`opsight.explain.gate`) and the metrics and logs
(:mod:`opsight.explain.publish`).

Exit statuses (``opsight.exit_codes``): 0 every model explained (and no new breaks when
gated); 1 a model failed, crashed or timed out, or a push failed; 3 new graph breaks
(``--fail-on-new-breaks``); 64 bad usage (a bad TARGET, zoo file or baseline, named)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from ..explain.result import STATUS_OK, ModelExplain
from ..explain.runner import ModelSpec, Progress, ZooRunner
from .arguments import parse_arguments
from ..exit_codes import ERROR, OK, REGRESSION, USAGE_ERROR

PREFIX = "opsight explain"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsight explain",
        description="Where and why torch.compile breaks a model's graph: graphs, breaks with "
                    "their reason and source line, compile time and memory, whether the "
                    "compiled outputs match eager (docs/explain.md).")
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help="module:factory or file.py:factory returning "
                             "(model_or_fn, example_inputs)")
    parser.add_argument("--zoo", metavar="FILE", help="a zoo file of models (YAML)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="models at once (default 1)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="time limit per model (default: the zoo's, else 600)")
    parser.add_argument("--family", default="", help="the family of the TARGETs (a label)")
    parser.add_argument("--backend", default="aot_eager",
                        help="torch.compile back-end timed and compared with eager "
                             "(default aot_eager; inductor generates code, slowly)")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--format", choices=("text", "json", "csv"), default="text")
    parser.add_argument("--output", "-o", metavar="FILE",
                        help="also write the report as JSON (.json) or CSV (.csv) to FILE")
    parser.add_argument("--baseline", metavar="RUN|FILE",
                        help="an explain report (JSON) or stored explain run to compare with")
    parser.add_argument("--fail-on-new-breaks", action="store_true",
                        help="exit 3 listing the breaks the baseline does not have")
    parser.add_argument("--push-gateway", metavar="URL",
                        help="push the graph and break metrics to a Prometheus Pushgateway")
    parser.add_argument("--loki", metavar="URL",
                        help="send one log line per break to Loki's push API")
    parser.add_argument("--commit", default=None,
                        help="the commit label (default: $GITHUB_SHA, $GIT_COMMIT, or git's HEAD)")
    parser.add_argument("--store", default=None, metavar="PATH", help="the run store to save in")
    parser.add_argument("--no-store", action="store_true", help="do not save the run")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    return parser


def current_commit() -> str:
    for variable in ("GITHUB_SHA", "GIT_COMMIT", "CI_COMMIT_SHA"):
        if os.environ.get(variable):
            return os.environ[variable][:12]
    try:
        answer = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return answer.stdout.strip() if answer.returncode == 0 and answer.stdout.strip() else "unknown"


class _UsageError(Exception):
    pass


def _models(options: argparse.Namespace) -> list[ModelSpec]:
    from ..explain.zoo import DEFAULT_TIMEOUT_S, ZooError, load_zoo

    models: list[ModelSpec] = []
    if options.zoo:
        try:
            models.extend(load_zoo(options.zoo))
        except ZooError as error:
            raise _UsageError(str(error)) from None
    for target in options.targets:
        where, colon, attribute = target.rpartition(":")
        if not colon or not where or not attribute:
            raise _UsageError(f"{target}: expected module:factory or file.py:factory")
        if (where.endswith(".py") or os.sep in where) and not os.path.isfile(where):
            raise _UsageError(f"{target}: no such file {where!r}")
        name = attribute if attribute not in {model.name for model in models} else target
        models.append(ModelSpec(name=name, target=target, family=options.family,
                                timeout_s=DEFAULT_TIMEOUT_S))
    if options.timeout is not None:
        for model in models:
            model.timeout_s = options.timeout
    if not models:
        raise _UsageError("nothing to explain: give TARGETs or --zoo FILE")
    return models


def _save(runner: ZooRunner, results: list[ModelExplain], commit: str, options) -> None:
    from .._store import save_run

    if not runner.trace_files:
        return
    # One value per key in the store: several models or families are joined by commas.
    tags = {"kind": "explain", "commit": commit,
            "model": ",".join(result.model for result in results)}
    families = sorted({result.family for result in results if result.family})
    if families:
        tags["family"] = ",".join(families)
    save_run(runner.trace_files, name="explain", tags=tags,
             command="opsight explain " + " ".join(sys.argv[2:]), store=options.store,
             prefix=PREFIX)


def command_main(arguments: list[str]) -> int:
    parser = _parser()
    options, status = parse_arguments(parser, arguments)
    if options is None:
        return status
    began = time.perf_counter()
    try:
        if options.jobs < 1:
            raise _UsageError(f"--jobs {options.jobs}: must be >= 1")
        if options.timeout is not None and not options.timeout > 0:
            raise _UsageError(f"--timeout {options.timeout:g}: must be > 0")
        if options.fail_on_new_breaks and not options.baseline:
            raise _UsageError("--fail-on-new-breaks needs --baseline RUN|FILE")
        if options.output and not options.output.endswith((".json", ".csv")):
            raise _UsageError(f"--output {options.output}: expected a .json or .csv file")
        models = _models(options)
        baseline = None
        if options.baseline:
            from ..explain.gate import BaselineError, load_baseline
            try:
                baseline = load_baseline(options.baseline, options.store)
            except BaselineError as error:
                raise _UsageError(str(error)) from None
        publishers = []
        if options.push_gateway or options.loki:
            from ..explain.publish import check_url
            for flag, url in (("--push-gateway", options.push_gateway), ("--loki", options.loki)):
                if url:
                    problem = check_url(url)
                    if problem:
                        raise _UsageError(f"{flag} {url}: {problem}")
            publishers = [options.push_gateway, options.loki]
    except _UsageError as error:
        parser.print_usage(sys.stderr)
        print(f"{PREFIX}: error: {error}", file=sys.stderr)
        return USAGE_ERROR

    progress = None if options.quiet else Progress(sys.stderr)
    import tempfile

    commit = options.commit or current_commit()
    with tempfile.TemporaryDirectory(prefix="opsight-explain-") as work:
        runner = ZooRunner(models, jobs=options.jobs, backend=options.backend,
                           rtol=options.rtol, atol=options.atol, work_directory=work,
                           record_traces=not options.no_store,
                           on_done=progress.done if progress else None,
                           on_tick=progress.tick if progress else None)
        try:
            results = runner.run()
        finally:
            if progress is not None:
                progress.close()
        if not options.no_store:
            _save(runner, results, commit, options)
    wall = time.perf_counter() - began
    startup = runner.startup_seconds
    status = OK if all(result.status == STATUS_OK for result in results) else ERROR
    _print_report(results, options, wall, startup)
    if publishers:
        from ..explain.publish import publish
        if not publish(results, commit=commit, push_gateway=options.push_gateway,
                       loki=options.loki, prefix=PREFIX):
            status = ERROR
    if baseline is not None:
        from ..explain.gate import compare_with_baseline
        outcome = compare_with_baseline(results, baseline)
        sys.stderr.write(outcome.text())
        if options.fail_on_new_breaks and outcome.failed:
            return REGRESSION
    return status


def timing_summary(results: list[ModelExplain], wall: float,
                   startup: float = 0.0) -> dict[str, float]:
    """The zoo's wall time, the models' own time (inside their processes), their compile
    time (dynamo's capture and the back-end's first call), and what opsight added: starting
    the fork server once (Python, opsight and torch imported) and, per model, forking it
    and reading its result, summed over models."""
    inside = sum(result.wall_seconds or 0.0 for result in results)
    around = sum(max(0.0, (result.parent_seconds or 0.0) - (result.wall_seconds or 0.0))
                 for result in results if result.wall_seconds is not None)
    compile_time = sum((result.explain_seconds or 0.0) + (result.compile_seconds or 0.0)
                       for result in results)
    return {"wall": wall, "models": inside, "compile": compile_time,
            "fork server start": startup, "per-model overhead": around}


def _print_report(results: list[ModelExplain], options, wall: float, startup: float) -> None:
    from ..explain.render import csv_report, json_report, text_report

    timing = timing_summary(results, wall, startup)
    if options.format == "json":
        sys.stdout.write(json_report(results, timing=timing))
    elif options.format == "csv":
        sys.stdout.write(csv_report(results))
    else:
        sys.stdout.write(text_report(results, overhead=timing))
    if options.output:
        text = (json_report(results, timing=timing) if options.output.endswith(".json")
                else csv_report(results))
        with open(options.output, "w", encoding="utf-8") as file:
            file.write(text)
