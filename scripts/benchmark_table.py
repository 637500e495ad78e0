"""Turns Google Benchmark JSON files into the tables of docs/performance.md.

Uses the median of the repetitions. Ratios compare a hot path with a baseline measured in
the same run, so they hold across machines better than the raw times do.
"""
import json
import sys

RATIOS = [
    # (benchmark, baseline, what the ratio means)
    ("BM_SpanEnabled/real_time/threads:1", "BM_ClockReadTwice", "enabled span / two clock reads"),
    ("BM_SpanNoSession", "BM_SpanCompiledOut", "span with no session / compiled out"),
    ("BM_SpanCompiledOut", "BM_EmptyLoop", "compiled-out span (a noinline call) / empty loop"),
    ("BM_NativeRead", "BM_BaselineCopyBytes", "native read / memcpy of the file"),
    ("BM_NativeWrite", "BM_BaselineCopyBytes", "native write / memcpy of the file"),
    ("BM_NativeWriteFile", "BM_BaselineWriteFileBytes",
     "native write to a real file / writing the same bytes to it"),
]


def seconds(entry):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[entry.get("time_unit", "ns")]
    return entry["real_time"] * scale


def main(paths):
    rows = {}
    for path in paths:
        with open(path) as file:
            for entry in json.load(file)["benchmarks"]:
                if entry.get("aggregate_name", "median") != "median":
                    continue
                name = entry["run_name"]
                rows[name] = entry
    print("| benchmark | median time | throughput |")
    print("|---|---|---|")
    for name, entry in rows.items():
        unit = entry.get("time_unit", "ns")
        rate = ""
        if "bytes_per_second" in entry:
            rate = f"{entry['bytes_per_second'] / 1e6:.0f} MB/s"
        elif "items_per_second" in entry:
            rate = f"{entry['items_per_second'] / 1e6:.1f} M items/s"
        print(f"| {name} | {entry['real_time']:.2f} {unit} | {rate} |")
    print()
    print("| ratio | value |")
    print("|---|---|")
    for name, baseline, meaning in RATIOS:
        if name in rows and baseline in rows:
            print(f"| {meaning} | {seconds(rows[name]) / seconds(rows[baseline]):.2f} |")
    one, two = rows.get("BM_SpanEnabled/real_time/threads:1"), rows.get("BM_SpanEnabled/real_time/threads:2")
    if one and two:
        # With threads, Google Benchmark divides the wall time by the iterations of all
        # threads together: one thread's time per span is twice the reported time.
        print(f"| per-thread span rate, 2 threads at once / 1 thread alone (wall time) | "
              f"{one['real_time'] / (2 * two['real_time']):.2f} |")
        # CPU time is per thread: what a span costs the thread that records it.
        print(f"| per-thread span rate, 2 threads at once / 1 thread alone (CPU time) | "
              f"{one['cpu_time'] / two['cpu_time']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
