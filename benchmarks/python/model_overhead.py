"""What tracing adds to a real model's forward: the demo's BERT-style encoder (2 layers,
random weights, batch 4 x 64 tokens) untraced, under opsight in each torch mode, and under
torch.profiler, every variant timed twice in the same interleaved rounds:

  hot path       the forwards alone, timed inside the session (what a long-running service
                 pays per request while it is traced)
  whole session  from the session's start to its end as a user pays it: start, the
                 forwards, stop, the tool's post-processing and its trace written to a file
                 (opsight: the .opsight file; torch.profiler: its exit processing and
                 export_chrome_trace)

Variants:
  untraced                 the model alone: the baseline of every ratio
  torch's floor            opsight's operator observer installed with no session recording:
                           its callback returns at once, so this is what torch itself adds
                           because a RecordFunction observer is installed (every operator
                           takes the dispatcher's slow path and builds a RecordFunction);
                           every tracer built on RecordFunction pays it, torch.profiler too
  opsight, torch off       opsight.profile() with OPSIGHT_TORCH=off (an empty session)
  opsight, switched off    the default session, then opsight.disable() inside it: what a
                           program pays for having opsight loaded and switched off
  opsight operators        torch operators only
  opsight modules          module spans only
  opsight ops+modules      the default (operators and module spans)
  opsight sampled 1/1000   the default with sample="1/1000": each forward is a unit (its
                           outermost module call), the first is recorded, the others are
                           sampled out: what a sampled-out request costs
  opsight modules, sampled 1/1000
                           the same with module spans only (OPSIGHT_TORCH=modules): no
                           RecordFunction observer is installed at all, so against the row
                           above it shows what the observer costs a sampled-out forward
  opsight production preset
                           what `opsight run --production` records (docs/production.md):
                           every module span, the operators of 1 in 100 forwards
                           (sample_scope="operators"), counters every second, the flight
                           recorder keeping the last 60 s in memory and written at the end
  torch.profiler           profile(activities=[CPU]), record_shapes off

Models (--model): the demo's encoder (default), or BERT-base from transformers
(BertModel(BertConfig()): 12 layers, hidden 768, random weights, nothing downloaded;
batch 1 x 128 tokens).

Each variant is timed by the wall clock and by the process's CPU time (every thread: torch's
workers and opsight's writer too), both printed: on a shared machine the CPU time is the
steadier, and it shows work a tracer moves off the program's thread. The process CPU time
is also split into the calling (main) thread's and every other thread's (torch's intra-op
workers, which spin while they wait for work, and opsight's writer). Times are medians over
rounds; each ratio is the median over rounds of the variant's time over the untraced time
of the same round (a slow stretch of the machine hits both sides alike).

Each opsight variant must record exactly (forwards x the operators or modules per forward)
and drop nothing, or the run stops: a figure for a session that lost events measures
nothing. Reported: medians over rounds, the ratio to untraced, and the added percentage.

Run: .venv/bin/python benchmarks/python/model_overhead.py [--rounds 9] [--forwards 40]
     [--threads 1] (--threads 0: torch's default thread count)
     [--variant "opsight sampled 1/1000" --variant "opsight, torch off"] (only those, and
     untraced)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from typing import Callable

import torch
from interleaved import median_ratios, run_rounds_raw

import opsight
import opsight.torch
from opsight.demo.model import build

_MODES = {  # OPSIGHT_TORCH for each opsight variant
    "opsight, torch off": "off",
    "opsight, switched off": "on",
    "opsight operators": "operators",
    "opsight modules": "modules",
    "opsight ops+modules": "on",
    "opsight sampled 1/1000": "on",
    "opsight modules, sampled 1/1000": "modules",
    "opsight production preset": "on",
}
_SAMPLED = ("opsight sampled 1/1000", "opsight modules, sampled 1/1000")


class Clocks:
    """Wall time, the process's CPU time (every thread: torch's, the tracer's writer...) and
    the calling thread's CPU time from a start; on a shared machine CPU time is the steadier
    of the two."""

    def __init__(self) -> None:
        self.wall = time.perf_counter_ns()
        self.cpu = time.process_time_ns()
        self.thread = time.thread_time_ns()

    def elapsed(self) -> tuple[int, int, int]:
        return (time.perf_counter_ns() - self.wall, time.process_time_ns() - self.cpu,
                time.thread_time_ns() - self.thread)


# Forwards run before the timed ones, in every variant (inside the session for a traced
# one): on this VM a core that idled for a few ms (a session's start and stop wait on
# threads) runs the next forward up to 25% slower, whatever ran before; without them the
# hot path of a 20-forward session carried ~0.5 ms of that, and so did every traced variant
# while the untraced one never idles. Set by --settle.
SETTLE_FORWARDS = 3


def forwards(model, inputs, count: int) -> tuple[int, int, int]:
    """Runs SETTLE_FORWARDS forwards, then ``count`` timed ones; returns the (wall, process
    CPU, calling thread's CPU) time the timed ones took (ns)."""
    with torch.inference_mode():
        for _ in range(SETTLE_FORWARDS):
            model(*inputs)
    clocks = Clocks()
    with torch.inference_mode():
        for _ in range(count):
            model(*inputs)
    return clocks.elapsed()


Figures = tuple[int, int, int, int, int, int, int]


def as_figures(hot: tuple[int, int, int], whole: tuple[int, int, int],
               overhead_line_ns: int = 0) -> Figures:
    """(hot wall, whole wall, hot CPU, whole CPU, the tracer overhead its report shows, hot
    CPU of the calling thread, whole CPU of the calling thread): what every variant
    returns."""
    return hot[0], whole[0], hot[1], whole[1], overhead_line_ns, hot[2], whole[2]


def counts_per_forward(model, inputs) -> dict[str, int]:
    """Operators and module spans one forward records (ops+modules), counted once."""
    with opsight.profile() as profile:
        forwards(model, inputs, 1)
    categories = profile.trace.slice_columns()["category"]
    recorded = SETTLE_FORWARDS + 1
    return {"operator": sum(1 for c in categories if c == "operator") // recorded,
            "module": sum(1 for c in categories if c == "module") // recorded}


def opsight_variant(name: str, model, inputs, count: int, expected: dict[str, int],
                    directory: str) -> Figures:
    """(hot path, whole session) wall and CPU ns of one opsight variant."""
    previous = os.environ.get("OPSIGHT_TORCH")
    os.environ["OPSIGHT_TORCH"] = _MODES[name]
    path = os.path.join(directory, "run.opsight")
    try:
        whole_clocks = Clocks()
        sample = "1/1000" if name in _SAMPLED else None
        preset = {}
        if name == "opsight production preset":  # the --production defaults
            preset = {"sample": "1/100", "sample_scope": "operators", "sample_ms": 1000,
                      "ring": "60s"}
        with opsight.profile(path, buffer_mb=256, **({"sample": sample} if sample else {}),
                             **preset) as profile:
            if name == "opsight, switched off":
                opsight.disable()
            hot = forwards(model, inputs, count)
            if name == "opsight, switched off":
                opsight.enable()
        whole = whole_clocks.elapsed()
    finally:
        if previous is None:
            os.environ.pop("OPSIGHT_TORCH", None)
        else:
            os.environ["OPSIGHT_TORCH"] = previous
    _check(name, profile.trace, count + SETTLE_FORWARDS, expected)
    return as_figures(hot, whole, profile.trace.run_info()["overhead_ns"])


def _check(name: str, trace, count: int, expected: dict[str, int]) -> None:
    info = trace.run_info()
    dropped = info.get("events_dropped", 0)
    categories = trace.slice_columns()["category"]
    recorded = {kind: sum(1 for c in categories if c == kind) for kind in ("operator", "module")}
    wanted = {"operator": 0, "module": 0}
    if name in ("opsight operators", "opsight ops+modules"):
        wanted["operator"] = expected["operator"] * count
    if name in ("opsight modules", "opsight ops+modules"):
        wanted["module"] = expected["module"] * count
    if name == "opsight sampled 1/1000":  # each forward is a unit: only the first is kept
        wanted = dict(expected)
    if name == "opsight modules, sampled 1/1000":
        wanted = {"operator": 0, "module": expected["module"]}
    if name == "opsight production preset":  # every module; the operators of 1 in 100
        wanted = {"operator": expected["operator"] * -(-count // 100),
                  "module": expected["module"] * count}
    if dropped or recorded != wanted:
        raise SystemExit(f"{name}: recorded {recorded}, expected {wanted}, {dropped} events "
                         "dropped: the benchmark measured nothing")


def untraced_variant(model, inputs, count: int) -> Figures:
    """The baseline: its whole "session" is its settling and timed forwards."""
    whole_clocks = Clocks()
    hot = forwards(model, inputs, count)
    return as_figures(hot, whole_clocks.elapsed())


def floor_variant(model, inputs, count: int) -> Figures:
    """torch's RecordFunction floor: the observer installed, nothing recorded."""
    import opsight._torch_observer as observer

    whole_clocks = Clocks()
    observer.install()
    try:
        hot = forwards(model, inputs, count)
    finally:
        observer.uninstall()
    return as_figures(hot, whole_clocks.elapsed())


def profiler_variant(model, inputs, count: int,
                     directory: str) -> Figures:
    path = os.path.join(directory, "torch-profiler.json")
    whole_clocks = Clocks()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        hot = forwards(model, inputs, count)
    profiler.export_chrome_trace(path)
    return as_figures(hot, whole_clocks.elapsed())


def build_bert_base():
    """BERT-base from its configuration (random weights, nothing downloaded) and one batch
    of 128 token ids."""
    import transformers

    transformers.logging.set_verbosity_error()
    model = transformers.BertModel(transformers.BertConfig()).eval()
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, model.config.vocab_size, (1, 128), generator=generator)
    return model, (input_ids,)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--forwards", type=int, default=40, help="forwards per session")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: default)")
    parser.add_argument("--settle", type=int, default=3,
                        help="untimed forwards before the timed ones, in every variant")
    parser.add_argument("--model", choices=("demo", "bert-base"), default="demo")
    parser.add_argument("--variant", action="append", default=[],
                        help="a variant to run besides untraced (repeatable; default: all)")
    arguments = parser.parse_args()
    global SETTLE_FORWARDS
    SETTLE_FORWARDS = arguments.settle
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    model, inputs = build() if arguments.model == "demo" else build_bert_base()
    forwards(model, inputs, 10)  # warm-up
    expected = counts_per_forward(model, inputs)
    count = arguments.forwards
    with tempfile.TemporaryDirectory(prefix="opsight-model-overhead-") as directory:
        variants: dict[str, Callable[[], Figures]] = {
            "untraced": lambda: untraced_variant(model, inputs, count),
            "torch's floor": lambda: floor_variant(model, inputs, count),
            **{name: (lambda name=name: opsight_variant(name, model, inputs, count, expected,
                                                        directory)) for name in _MODES},
            "torch.profiler": lambda: profiler_variant(model, inputs, count, directory),
        }
        if arguments.variant:
            wanted = {"untraced", *arguments.variant}
            unknown = wanted - set(variants)
            if unknown:
                parser.error(f"unknown variants {sorted(unknown)}; known: {list(variants)}")
            variants = {name: run for name, run in variants.items() if name in wanted}
        figures = run_rounds_raw(variants, arguments.rounds)
    medians = {name: tuple(statistics.median(column) for column in zip(*rounds))
               for name, rounds in figures.items()}
    ratios = median_ratios(figures, "untraced")
    load = os.getloadavg()[0]
    print(f"opsight {opsight.__version__}, torch {torch.__version__}, Python "
          f"{platform.python_version()}, {torch.get_num_threads()} torch thread(s), load "
          f"average {load:.1f}")
    described = ("demo model (TinyBert, 2 layers, batch 4 x 64)" if arguments.model == "demo"
                 else "BERT-base (transformers, 12 layers, hidden 768, batch 1 x 128)")
    print(f"{described}: {expected['operator']} operators and "
          f"{expected['module']} modules per forward; {count} forwards per session, "
          f"{arguments.rounds} interleaved rounds; medians of times, medians of per-round "
          "ratios")
    for title, first in (("wall time", 0), ("process CPU time (all threads)", 2)):
        print(f"\n{title}, per forward")
        print(f"{'variant':<34}{'hot path':>12}{'ratio':>8}{'added':>9}"
              f"{'whole session':>16}{'ratio':>8}{'added':>9}")
        for name in variants:
            h = medians[name][first] / count
            w = medians[name][first + 1] / count
            hot_ratio, whole_ratio = ratios[name][first], ratios[name][first + 1]
            print(f"{name:<34}{h / 1e6:>9.3f} ms{hot_ratio:>8.3f}"
                  f"{(hot_ratio - 1) * 100:>8.1f}%{w / 1e6:>13.3f} ms{whole_ratio:>8.3f}"
                  f"{(whole_ratio - 1) * 100:>8.1f}%")
    print("\nprocess CPU time split, per forward: the calling thread's, and every other "
          "thread's (torch's intra-op workers, opsight's writer), with what each adds over "
          "untraced (difference of medians)")
    print(f"{'variant':<34}{'hot: calling':>14}{'others':>10}{'whole: calling':>16}"
          f"{'others':>10}")
    base = medians["untraced"]
    for name in variants:
        figure = medians[name]
        hot_main, whole_main = figure[5] / count, figure[6] / count
        hot_others, whole_others = (figure[2] - figure[5]) / count, (figure[3] - figure[6]) / count
        added = (f"  (+{(figure[5] - base[5]) / count / 1e3:.0f}/"
                 f"+{(figure[2] - figure[5] - base[2] + base[5]) / count / 1e3:.0f} µs hot, "
                 f"+{(figure[6] - base[6]) / count / 1e3:.0f}/"
                 f"+{(figure[3] - figure[6] - base[3] + base[6]) / count / 1e3:.0f} µs whole)")
        print(f"{name:<34}{hot_main / 1e6:>11.3f} ms{hot_others / 1e6:>7.3f} ms"
              f"{whole_main / 1e6:>13.3f} ms{whole_others / 1e6:>7.3f} ms"
              f"{'' if name == 'untraced' else added}")
    print("\nthe overhead line (what the report says opsight cost) against the measured hot "
          "path (process CPU), per forward, as a share of the untraced forward")
    base_cpu = medians["untraced"][2] / count
    for name in (name for name in _MODES if name in variants):
        said = medians[name][4] / count
        measured = (ratios[name][2] - 1) * base_cpu
        agreement = f"{said / measured:.2f}x" if measured > 0 else "(nothing measured)"
        print(f"{name:<34} says {said / 1e3:7.1f} µs ({said / base_cpu * 100:5.2f}%), measured "
              f"{measured / 1e3:7.1f} µs ({measured / base_cpu * 100:5.2f}%): {agreement}")

if __name__ == "__main__":
    main()
