"""End-to-end Chrome JSON import: ``opsight report FILE --summary``, process start included,
for one or more builds of the command, interleaved (docs/performance.md, "Chrome JSON
import end to end").

Writes (once) a synthetic trace like a PyTorch profiler's or opsight's own writer's: six
threads of one process, trees of a request holding a forward pass holding four operators,
every slice an X event with two or three args; about 1.33M events in 200 MB. Each round
reads the file with ``cat`` (the cost of the bytes alone), then runs every command once,
in an order reversed every other round; prints per command the median and best wall time,
MB/s, CPU time (user + system), and peak RSS beyond the file's size per slice.

    python3 benchmarks/python/chrome_json_import.py build/release/src/cli/opsight \\
        [other/opsight ...] [--file /tmp/big.json] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time


def write_trace(path: str, target_bytes: int) -> int:
    """Writes the synthetic trace to ``path``; returns its number of slices."""
    operators = ["aten::linear", "aten::relu", "aten::addmm", "aten::softmax"]
    threads = [1001, 1002, 1003, 1004, 1005, 1006]
    clock = {tid: 1_000_000.0 for tid in threads}
    size = 0
    slices = 0
    tree = 0
    with open(path, "w", encoding="ascii") as out:
        head = ['{"traceEvents":[\n']
        for tid in threads:
            head.append('{"ph":"M","name":"thread_name","pid":1000,"tid":%d,'
                        '"args":{"name":"worker-%d"}},\n' % (tid, tid))
        head.append('{"ph":"M","name":"process_name","pid":1000,"args":{"name":"bench"}}')
        out.write("".join(head))
        size += sum(map(len, head))
        chunk: list[str] = []
        while size < target_bytes:
            tid = threads[tree % len(threads)]
            start = clock[tid]
            batch = tree % 64
            events = [
                ',\n{"ph":"X","cat":"python","name":"request","pid":1000,"tid":%d,"ts":%.3f,'
                '"dur":%.3f,"args":{"batch":%d,"shape":"[8, 1024]"}}'
                % (tid, start, 10.0 + (tree % 997) / 1000, batch),
                ',\n{"ph":"X","cat":"python","name":"forward","pid":1000,"tid":%d,"ts":%.3f,'
                '"dur":9.000,"args":{"batch":%d,"shape":"[8, 1024]"}}' % (tid, start + 0.1, batch),
            ]
            for index, name in enumerate(operators):
                events.append(
                    ',\n{"ph":"X","cat":"cpu_op","name":"%s","pid":1000,"tid":%d,"ts":%.3f,'
                    '"dur":%.3f,"args":{"batch":%d,"shape":"[8, 1024]","flops":%.1f}}'
                    % (name, tid, start + 0.2 + index * 2, 1.5 + (tree % 13) / 1000, batch,
                       1.5e6 + index))
            clock[tid] = start + 12.0 + (tree % 7)
            tree += 1
            slices += len(events)
            size += sum(map(len, events))
            chunk.extend(events)
            if len(chunk) >= 60_000:
                out.write("".join(chunk))
                chunk = []
        out.write("".join(chunk))
        out.write('\n],"displayTimeUnit":"ns"}\n')
    return slices


def run_once(command: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS bytes) of one run of ``command``, its output discarded."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{command[0]} failed with status {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commands", nargs="+", help="opsight executables to compare")
    parser.add_argument("--file", default="/tmp/opsight_import_200mb.json")
    parser.add_argument("--bytes", type=int, default=200_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    arguments = parser.parse_args()
    slices_path = arguments.file + ".slices"
    if not os.path.exists(arguments.file) or not os.path.exists(slices_path):
        with open(slices_path, "w", encoding="ascii") as out:
            out.write(str(write_trace(arguments.file, arguments.bytes)))
    with open(slices_path, encoding="ascii") as slices_file:
        slices = int(slices_file.read())
    size = os.path.getsize(arguments.file)
    names = ["cat"] + arguments.commands
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in names}
    for round_index in range(arguments.rounds):
        order = list(arguments.commands)
        if round_index % 2:
            order.reverse()
        results["cat"].append(run_once(["cat", arguments.file]))
        for name in order:
            results[name].append(run_once([name, "report", arguments.file, "--summary"]))
    print(f"{arguments.file}: {size / 1e6:.1f} MB, {slices} slices, "
          f"{arguments.rounds} rounds, load average {os.getloadavg()[0]:.1f}")
    for name in names:
        walls = [wall for wall, _, _ in results[name]]
        cpus = [cpu for _, cpu, _ in results[name]]
        rss = statistics.median(peak for _, _, peak in results[name])
        wall = statistics.median(walls)
        line = (f"{name}: wall median {wall:.3f} s ({size / 1e6 / wall:.0f} MB/s), "
                f"best {min(walls):.3f} s ({size / 1e6 / min(walls):.0f} MB/s), "
                f"CPU median {statistics.median(cpus):.3f} s")
        if name != "cat":
            line += (f", peak RSS {rss / 1e6:.0f} MB: "
                     f"{(rss - size) / slices:.0f} B per slice beyond the file")
        print(line)


if __name__ == "__main__":
    main()
