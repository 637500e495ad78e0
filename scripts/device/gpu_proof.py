"""The GPU timeline's proof on a GPU machine (issue 27; run by scripts/device/gpu_check.sh).

Each check prints one line and lands in ``$OUT/gpu_figures.json``; the exit status is the
number of checks that failed. Checks, in the order they run:

1. kernels: the demo model's forward on CUDA under ``opsight.profile(cuda=True)`` and under
   ``torch.profiler`` (one after the other, never together): the same kernel names with the
   same counts, every kernel linked to its launching call and an operator and module;
2. durations: per kernel name, opsight's total within 2% of torch.profiler's; a large
   matmul's kernel duration within 2% of CUDA events around it;
3. overhead: forwards with GPU tracing against untraced, interleaved rounds, medians
   (target <= 3%), torch.profiler's figure beside it; after ``stop()`` the untraced forward
   is back within noise (pytorch#144455);
4. a CUDA graph replay and a torch.compile (inductor) model: kernels present and attributed;
5. the switch: kernels run while ``opsight.disable()`` holds are not recorded;
6. NVTX: a ``torch.cuda.nvtx.range_push`` range appears.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict

import torch

import opsight
from opsight.demo.model import factory

OUT = os.environ.get("OUT", ".")
figures: dict = {}
failures = 0


def check(name: str, ok: bool, detail: str) -> None:
    global failures
    figures.setdefault("checks", {})[name] = {"ok": bool(ok), "detail": detail}
    failures += 0 if ok else 1
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def synchronize() -> None:
    torch.cuda.synchronize()


def opsight_kernels(trace_frame):
    kernels = trace_frame[trace_frame["category"] == "gpu_kernel"]
    return kernels


def main() -> int:
    assert torch.cuda.is_available(), "no CUDA device"
    figures["device"] = torch.cuda.get_device_name(0)
    figures["torch"] = torch.__version__
    model, inputs = factory()
    model = model.cuda().eval()
    inputs = tuple(x.cuda() if hasattr(x, "cuda") else x for x in (inputs if isinstance(inputs, tuple) else (inputs,)))

    def forward():
        with torch.no_grad():
            model(*inputs)

    for _ in range(5):
        forward()
    synchronize()

    # 1. kernels: opsight, then torch.profiler, on the same 3 forwards.
    with opsight.profile(cuda=True) as prof:
        for _ in range(3):
            forward()
        synchronize()
    frame = prof.dataframe()
    ours = opsight_kernels(frame)
    our_counts = Counter(ours["name"])
    from torch.profiler import ProfilerActivity, profile as torch_profile
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as reference:
        for _ in range(3):
            forward()
        synchronize()
    theirs = [e for e in reference.events() if e.device_type == torch.autograd.DeviceType.CUDA
              and not e.name.startswith(("Memcpy", "Memset"))]
    their_counts = Counter(e.name for e in theirs)
    figures["kernels"] = {"opsight": sum(our_counts.values()), "torch_profiler": sum(their_counts.values()),
                          "names_opsight": len(our_counts), "names_torch_profiler": len(their_counts)}
    missing = {name: count for name, count in their_counts.items() if our_counts.get(name, 0) != count}
    check("same kernels as torch.profiler", not missing,
          f"{sum(our_counts.values())} kernels vs {sum(their_counts.values())}; differing names: {list(missing)[:5]}")
    # The kernel table: every kernel of the forward under an operator.
    table = prof.kernels()
    unattributed = [row["name"] for row in table if not row["launched_by"] or row["without_launch"]]
    check("every kernel name has the operators that launch it", not unattributed,
          f"{len(table)} kernel names; without a launch site: {unattributed[:3]}")
    attributed = frame[(frame["category"] == "gpu_kernel")]
    linked = int(attributed["linked_from_span_id"].notna().sum())
    check("every kernel linked to its launch", linked == len(attributed),
          f"{linked} of {len(attributed)} kernels have a launching call")

    # 2. durations per name, and a large matmul against CUDA events.
    our_totals = defaultdict(int)
    for name, duration in zip(ours["name"], ours["dur"]):
        our_totals[name] += int(duration)
    their_totals = defaultdict(float)
    for event in theirs:
        their_totals[event.name] += event.time_range.elapsed_us() * 1000.0
    worst = 0.0
    for name, total in their_totals.items():
        if total > 10_000 and name in our_totals:
            worst = max(worst, abs(our_totals[name] - total) / total)
    figures["duration_worst_relative_difference"] = worst
    check("kernel totals within 2% of torch.profiler", worst <= 0.02, f"worst difference {worst:.2%} (kernels over 10 us)")

    a = torch.randn(8192, 8192, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    (a @ a)
    synchronize()
    with opsight.profile(cuda=True) as prof:
        start.record()
        c = a @ a
        end.record()
        synchronize()
    del c
    event_ns = start.elapsed_time(end) * 1e6
    mm = opsight_kernels(prof.dataframe())
    kernel_ns = float(mm["dur"].max())
    figures["matmul"] = {"cuda_events_ns": event_ns, "opsight_kernel_ns": kernel_ns}
    check("matmul within 2% of CUDA events", abs(kernel_ns - event_ns) / event_ns <= 0.02,
          f"kernel {kernel_ns / 1e6:.3f} ms, events {event_ns / 1e6:.3f} ms")

    # 3. overhead: interleaved rounds of 20 forwards.
    def timed(mode: str) -> float:
        synchronize()
        began = time.perf_counter()
        if mode == "opsight":
            with opsight.profile(cuda=True):
                for _ in range(20):
                    forward()
                synchronize()
        elif mode == "torch.profiler":
            with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
                for _ in range(20):
                    forward()
                synchronize()
        else:
            for _ in range(20):
                forward()
            synchronize()
        return (time.perf_counter() - began) / 20
    rounds = defaultdict(list)
    for _ in range(9):
        for mode in ("untraced", "opsight", "torch.profiler"):
            rounds[mode].append(timed(mode))
    after = [timed("untraced") for _ in range(9)]
    base = statistics.median(rounds["untraced"])
    ratios = {mode: statistics.median(values) / base - 1 for mode, values in rounds.items()}
    ratios["untraced after stop"] = statistics.median(after) / base - 1
    figures["overhead"] = {"forward_untraced_ms": base * 1e3, **{k: round(v, 4) for k, v in ratios.items()}}
    check("forward with GPU tracing <= 3% slower", ratios["opsight"] <= 0.03,
          f"opsight {ratios['opsight']:+.1%}, torch.profiler {ratios['torch.profiler']:+.1%} "
          "(whole session per forward, start and stop included)")
    check("after stop the forward is back", abs(ratios["untraced after stop"]) <= 0.02,
          f"{ratios['untraced after stop']:+.1%} against untraced before")

    # 4. a CUDA graph replay and torch.compile.
    static_input = torch.randn(256, 256, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            static_input.relu().sum()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = (static_input @ static_input).relu()
    with opsight.profile(cuda=True) as prof:
        with opsight.span("replay"):
            graph.replay()
            synchronize()
    del static_output
    frame = prof.dataframe()
    replays = frame[frame["category"] == "gpu_graph"]
    check("CUDA graph replay: kernels under the replay", len(replays) >= 1 and (frame["category"] == "gpu_kernel").sum() >= 2,
          f"{len(replays)} replay spans, {(frame['category'] == 'gpu_kernel').sum()} kernels")

    compiled = torch.compile(lambda x: (x * 2 + 1).relu())
    x = torch.randn(1 << 20, device="cuda")
    compiled(x)
    synchronize()
    with opsight.profile(cuda=True) as prof:
        compiled(x)
        synchronize()
    names = set(opsight_kernels(prof.dataframe())["name"])
    check("torch.compile: Triton kernels keep their names", any(name.startswith("triton_") for name in names),
          f"kernels: {sorted(names)[:3]}")

    # The switch: kernels run while tracing is off are not recorded, and cost no CUPTI.
    with opsight.profile(cuda=True) as prof:
        opsight.disable()
        torch.relu(a)
        synchronize()
        opsight.enable()
        torch.sigmoid(a)
        synchronize()
    names = set(opsight_kernels(prof.dataframe())["name"])
    check("opsight.disable() switches GPU tracing off", not any("relu" in n.lower() for n in names)
          and any("sigmoid" in n.lower() for n in names), f"kernels: {sorted(names)[:4]}")

    # 5. NVTX.
    with opsight.profile(cuda=True) as prof:
        torch.cuda.nvtx.range_push("opsight-nvtx-check")
        (a @ a)
        torch.cuda.nvtx.range_pop()
        synchronize()
    found = "opsight-nvtx-check" in set(prof.dataframe()["name"])
    check("an NVTX range appears", found, "range_push/range_pop" + (" found" if found else " missing"))

    with open(os.path.join(OUT, "gpu_figures.json"), "w") as handle:
        json.dump(figures, handle, indent=2, default=str)
    print(json.dumps(figures, indent=2, default=str))
    return failures


if __name__ == "__main__":
    sys.exit(main())
