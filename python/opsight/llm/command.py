"""``opsight bench --generate TARGET``: token-level benchmark of a generation back-end
(docs/llm.md). TARGET: an OpenAI-compatible server's URL (``http://host:8000``), a
random-weight model (``random:gpt2``, ``random:llama``), or ``module:factory`` returning a
transformers causal LM.

Exit status: 0 ok; 1 unusable target; 3 an SLO percentile was not held (as ``--p99-bound-ms``
of the other bench); 64 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from typing import Any

from ..exit_codes import ERROR, REGRESSION, USAGE_ERROR


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    result = _Parser(
        prog="opsight bench --generate",
        description="Time LLM generation token by token: TTFT, ITL, TPOT, e2e, tokens/s "
                    "percentiles and goodput under SLOs, in process or against an "
                    "OpenAI-compatible server; each load point is saved as a run.",
        epilog="Examples: opsight bench --generate random:gpt2 --requests 32;  "
               "opsight bench --generate http://127.0.0.1:8000 --api chat --sweep "
               "concurrency=1,2,4,8 --slo ttft_p99=200ms,tpot_p99=50ms")
    result.add_argument("--generate", action="store_true", required=True,
                        help="benchmark token generation (this command)")
    result.add_argument("target", metavar="TARGET",
                        help="http(s)://HOST:PORT[/v1], random:gpt2, random:llama or module:factory")
    result.add_argument("--api", choices=("completions", "chat"), default="completions",
                        help="server API (default: %(default)s)")
    result.add_argument("--model", default="", help="model name sent to the server / reported")
    result.add_argument("--requests", type=int, default=32, help="requests per load point")
    result.add_argument("--input-len", default="32",
                        help="input tokens: N, uniform:LOW:HIGH, normal:MEAN:STD (default: 32)")
    result.add_argument("--output-len", default="32", help="output tokens (same forms)")
    result.add_argument("--prompts", metavar="FILE", help="prompts, one a line (or JSON lines)")
    load = result.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int, help="requests in flight (closed loop)")
    load.add_argument("--rate", type=float, help="Poisson arrivals, requests/s (open loop)")
    load.add_argument("--sweep", metavar="concurrency=1,2,4|rate=1,2,4",
                      help="one load point per value; stops once throughput saturates")
    result.add_argument("--saturation", type=float, default=0.05,
                        help="a sweep stops at a point adding less than this share of "
                             "output tokens/s (default: %(default)s)")
    result.add_argument("--slo", help="e.g. ttft_p99=200ms,tpot_p99=50ms (goodput; exit 3 "
                                      "when a percentile is not held)")
    result.add_argument("--warmup", type=int, default=2,
                        help="requests sent one at a time before the first point, not "
                             "measured (default: %(default)s)")
    result.add_argument("--steady-state", choices=("auto", "off"), default="auto",
                        help="auto: leave each point's start-up transient out of its summary "
                             "(MSER-5 over the requests' e2e; default)")
    result.add_argument("--until-tight", type=float, metavar="REL",
                        help="--requests is the most per point: stop offering once the 95%% "
                             "intervals of TTFT and TPOT p50 and p99 are within +/-REL "
                             "(e.g. 0.05)")
    result.add_argument("--min-requests", type=int, default=50,
                        help="with --until-tight, measured requests before a stop "
                             "(default: %(default)s)")
    result.add_argument("--timeout", default="30s", help="first-token and idle timeout per "
                                                        "request (default: %(default)s)")
    result.add_argument("--seed", type=int, default=0)
    result.add_argument("--device", help="in process: move the model there (cpu, cuda, "
                                         "cuda:1; default: where the factory left it)")
    result.add_argument("--format", choices=("text", "json"), default="text")
    result.add_argument("-o", "--output", help="write the report to this file")
    result.add_argument("--plot", metavar="FILE.svg", help="the sweep's throughput-latency "
                        "Pareto frontier and TTFT/TPOT/ITL distributions, drawn with "
                        "matplotlib (.svg, .png or .pdf)")
    result.add_argument("--name", help="stored runs' name (default: llm bench TARGET)")
    result.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE")
    result.add_argument("--no-store", action="store_true", help="do not save runs")
    result.add_argument("--store", metavar="PATH", help="run store file")
    return result


def _backend(options: argparse.Namespace) -> tuple[Any, str, str]:
    """(send, model name, operation)."""
    from .load import http_backend, transformers_backend
    from .metrics import parse_duration_ns

    timeout = parse_duration_ns(options.timeout) / 1e9
    target = options.target
    if target.startswith(("http://", "https://")):
        from .client import Endpoint

        endpoint = Endpoint(target, api=options.api, model=options.model,
                            first_token_timeout=timeout, idle_timeout=timeout)
        return (http_backend(endpoint), options.model or target,
                "chat" if options.api == "chat" else "text_completion")
    from .huggingface import model_name

    if target.startswith("random:"):
        from .models import random_model

        model = random_model(target.partition(":")[2])
    else:
        from ..models import ModelError
        module_name, separator, factory = target.rpartition(":")
        if not separator or not module_name:
            raise ValueError(f"{target!r}: expected a URL, random:NAME or module:factory")
        import importlib
        import importlib.util

        if module_name.endswith(".py"):
            spec = importlib.util.spec_from_file_location("opsight_llm_target", module_name)
            if spec is None or spec.loader is None:
                raise ModelError(f"{module_name}: cannot load")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        model = getattr(module, factory)()
    if options.device is not None:
        from .models import to_device

        model = to_device(model, options.device)
    name = options.model or model_name(model)
    return transformers_backend(model, name=name), name, "text_completion"


def _sweep(text: str | None, options: argparse.Namespace) -> tuple[str, list[float]]:
    if text is None:
        if options.rate is not None:
            return "rate", [options.rate]
        return "concurrency", [options.concurrency or 1]
    key, separator, values = text.partition("=")
    if not separator or key not in ("concurrency", "rate"):
        raise ValueError(f"--sweep {text!r}: expected concurrency=1,2,4 or rate=1,2,4")
    try:
        numbers = [float(value) for value in values.split(",") if value.strip()]
    except ValueError:
        raise ValueError(f"--sweep {text!r}: the values are numbers") from None
    if not numbers or any(number <= 0 for number in numbers):
        raise ValueError(f"--sweep {text!r}: the values are positive")
    if key == "concurrency" and any(number != int(number) for number in numbers):
        raise ValueError(f"--sweep {text!r}: concurrencies are integers")
    return key, numbers


def run_sweep(send: Any, *, model: str, operation: str, key: str, values: list[float],
              requests: int, input_length: str, output_length: str,
              prompts: list[str] | None = None, slo: Any = (), seed: int = 0, warmup: int = 0,
              saturation: float = 0.05, store: Any = False, name: str = "",
              tags: list[str] | None = None, progress: Any = None,
              steady_state: bool = False, until_tight: float | None = None,
              min_requests: int = 50) -> dict[str, Any]:
    """One load point per value of ``key`` (``concurrency`` or ``rate``), stopping once
    output tokens/s saturates; each point recorded (an in-memory session) and, with
    ``store``, saved as a run tagged with the sweep's id. Returns the report."""
    from .. import profile
    from .load import make_requests, run_load, saturated

    sweep_id = uuid.uuid4().hex[:12]
    if warmup:
        for spec in make_requests(warmup, input_length, output_length, prompts, seed + 7):
            from .timeline import Request
            send(spec, Request(model, spec.input_tokens))
    points = []
    throughputs: list[float] = []
    for index, value in enumerate(values):
        specs = make_requests(requests, input_length, output_length, prompts, seed + index)
        point_tags = {"llm_bench": "1", "sweep": sweep_id, key: f"{value:g}", "model": model,
                      "point": str(index)}
        label = f"{name or 'llm bench ' + model} {key}={value:g}"
        with profile(store=store, name=label, tags=point_tags, label=label) as recording:
            from .. import span
            with span("opsight bench --generate", "gen_ai", **{key: value}) as root:
                result = run_load(send, specs, model=model, operation=operation, slo=slo,
                                  seed=seed + index,
                                  concurrency=int(value) if key == "concurrency" else None,
                                  rate=value if key == "rate" else None,
                                  steady_state=steady_state, until_tight=until_tight,
                                  min_requests=min_requests)
                summary = result.summary
                root.set("output_tokens_per_second", summary["output_tokens_per_second"] or 0.0)
                root.set("requests_per_second", summary["requests_per_second"] or 0.0)
                for metric in ("ttft", "tpot", "itl", "e2e"):
                    for q in ("p50", "p99"):
                        found = summary["metrics"][metric][q]
                        if found is not None:
                            root.set(f"{metric}_{q}_ns", float(found))
                if summary["goodput_requests_per_second"] is not None:
                    root.set("goodput_requests_per_second", summary["goodput_requests_per_second"])
        saved = getattr(recording, "saved_run", None)
        point = {key: value, "summary": summary, "offered": result.offered,
                 "run": saved.get("id") if isinstance(saved, dict) else None,
                 "requests": [request.to_dict() for request in result.requests]}
        points.append(point)
        if progress is not None:
            progress(point)
        throughputs.append(summary["output_tokens_per_second"] or 0.0)
        if len(values) > 1 and saturated(throughputs, saturation):
            break
    saturation_point = None
    if len(values) > 1 and saturated(throughputs, saturation):
        # The last point that still added throughput: the one the sweep stopped after.
        best = max(range(len(throughputs) - 1), key=throughputs.__getitem__)
        saturation_point = points[best][key]
    return {"sweep": sweep_id, "model": model, "key": key, "values": values,
            "points": points, "saturated_at": saturation_point,
            "stopped_early": len(points) < len(values)}


def render(report: dict[str, Any]) -> str:
    from .metrics import render_summary

    key = report["key"]
    text = []
    for point in report["points"]:
        run = f" (run {point['run']})" if point["run"] is not None else ""
        text.append(("\n" if text else "") + render_summary(
            point["summary"], f"== {report['model']}, {key}={point[key]:g}{run} =="))
        summary = point["summary"]
        if summary.get("warmup_requests"):
            text.append(f"  steady state from request {summary['warmup_requests'] + 1} of "
                        f"{point.get('offered', '?')} (the first {summary['warmup_requests']} "
                        f"left out as start-up transient)\n")
        if summary.get("stopped_early"):
            text.append(f"  stopped early: {summary['stopped_early']}\n")
        failures = [request for request in point["requests"] if not request["ok"]]
        for request in failures[:5]:
            text.append(f"  request {request['request_id']} failed: {request['error']}: "
                        f"{request['error_message']}\n")
        if len(failures) > 5:
            text.append(f"  ... and {len(failures) - 5} more failed requests\n")
    if len(report["points"]) > 1:
        text.append(f"sweep {report['sweep']}: {len(report['points'])} points"
                    + (f", throughput saturated at {key}={report['saturated_at']:g}"
                       if report["saturated_at"] is not None else "") + "\n")
    elif text and not text[-1].endswith("\n"):
        text.append("\n")
    return "".join(text)


def main(arguments: list[str]) -> int:
    options = parser().parse_args(arguments)
    from ..models import ModelError
    from .load import parse_length, read_prompts
    from .metrics import parse_duration_ns, parse_slo

    try:
        slo = parse_slo(options.slo)
        key, values = _sweep(options.sweep, options)
        parse_length(options.input_len)
        parse_length(options.output_len)
        parse_duration_ns(options.timeout)
        if options.requests < 1:
            raise ValueError("--requests must be >= 1")
        if options.until_tight is not None and not 0 < options.until_tight < 1:
            raise ValueError(f"--until-tight {options.until_tight:g}: expected a relative "
                             "width between 0 and 1, e.g. 0.05")
        if options.min_requests < 1:
            raise ValueError("--min-requests must be >= 1")
        if options.plot:
            from .plots import check_plot_path
            check_plot_path(options.plot)
    except ValueError as error:
        print(f"opsight bench --generate: {error}", file=sys.stderr)
        return USAGE_ERROR
    for tag in options.tag:
        if not tag.partition("=")[0]:
            print(f"opsight bench --generate: --tag {tag!r}: expected KEY=VALUE", file=sys.stderr)
            return USAGE_ERROR
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        prompts = read_prompts(options.prompts) if options.prompts else None
        send, model, operation = _backend(options)
    except (ValueError, ImportError, AttributeError, OSError, ModelError) as error:
        print(f"opsight bench --generate: {options.target}: {error}", file=sys.stderr)
        return ERROR
    store: Any = False if options.no_store else (options.store or True)
    report = run_sweep(send, model=model, operation=operation, key=key, values=values,
                       requests=options.requests, input_length=options.input_len,
                       output_length=options.output_len, prompts=prompts, slo=slo,
                       seed=options.seed, warmup=options.warmup, saturation=options.saturation,
                       store=store, name=options.name or "", tags=options.tag,
                       steady_state=options.steady_state == "auto",
                       until_tight=options.until_tight, min_requests=options.min_requests)
    text = json.dumps(report, indent=1) + "\n" if options.format == "json" else render(report)
    if options.output:
        with open(options.output, "w", encoding="utf-8") as file:
            file.write(text)
        print(f"opsight bench --generate: wrote {options.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if options.plot:
        from .plots import write_sweep_plot
        write_sweep_plot(report, options.plot)
        print(f"opsight bench --generate: wrote {options.plot}", file=sys.stderr)
    held = [outcome["held"] for point in report["points"]
            for outcome in (point["summary"]["slo_held"] or {}).values()]
    if held and not all(held):
        print("opsight bench --generate: an SLO percentile was not held", file=sys.stderr)
        return REGRESSION
    return 0
