"""End-to-end export throughput to a real collector (docs/export.md, *End to end to a real
collector*): ``opsight export`` of a stored run to Jaeger v2 on this machine, over
OTLP/HTTP protobuf, timed whole (the command, start to stop, as a user pays it) and for
the sending alone (the export report's seconds).

Two runs of the same size, recorded once with ``opsight.profile``:

- **one trace**: REQUESTS requests of 2 spans, all in the run's trace (a batch job);
- **a trace per request**: the same requests, each joined to a trace of its own
  (``opsight.propagation.continue_trace``), as a server's requests are.

Each is sent at several batch sizes with the default two requests in flight, to two
Jaegers on this machine: one that stores the spans in memory (queryable, as the tests use
it) and one that receives, decodes and counts them but discards them (its ``nop``
exporter: the collector's receiving cost alone). Rounds are interleaved and the figures
are medians. Jaeger's receiver must count every span
(``otelcol_receiver_accepted_spans_total``), or the row says so. The collector shares the
machine's cores with the sender.

    .venv/bin/python benchmarks/python/export_throughput.py [--requests 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import real_servers  # noqa: E402  (the tests' server management: same binaries, same config)

RECORD = textwrap.dedent("""
    import os, sys
    import opsight
    from opsight.propagation import continue_trace

    requests, per_request_trace, output = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    with opsight.profile(output, store=False):
        for index in range(requests):
            with opsight.span("request", index=index):
                if per_request_trace:
                    header = f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"
                    with continue_trace({"traceparent": header}):
                        with opsight.span("model"):
                            pass
                else:
                    with opsight.span("model"):
                        pass
""")

SHAPES = {"one trace": "0", "a trace per request": "1"}
BATCH_SIZES = (512, 2048, 4096)


def export_once(path: Path, jaeger, batch: int) -> dict:
    before = jaeger.accepted_spans()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "export", str(path), "--to",
         f"otlp={jaeger.otlp_http_endpoint}", "--batch-size", str(batch), "--format", "json"],
        capture_output=True, text=True, timeout=600)
    whole = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"opsight export failed: {done.stderr}")
    report = json.loads(done.stdout)[0]
    time.sleep(0.5)  # the receiver's count settles
    return {"whole_s": whole, "sending_s": report["seconds"], "spans": report["spans"],
            "sent": report["sent"], "accepted": jaeger.accepted_spans() - before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with (tempfile.TemporaryDirectory() as folder, real_servers.jaeger() as storing,
          real_servers.jaeger(store=False) as receiving):
        jaegers = {"stores": storing, "receives only": receiving}
        script = Path(folder) / "record.py"
        script.write_text(RECORD)
        paths = {}
        for shape, flag in SHAPES.items():
            paths[shape] = Path(folder) / f"{flag}.opsight"
            subprocess.run([sys.executable, str(script), str(options.requests), flag,
                            str(paths[shape])], check=True, timeout=600,
                           env={**os.environ, "OPSIGHT_HOME": folder})
        cases = [(collector, shape, batch) for collector in jaegers for shape in SHAPES
                 for batch in BATCH_SIZES]
        results: dict[tuple[str, str, int], list[dict]] = {case: [] for case in cases}
        for round_index in range(options.rounds):
            order = cases if round_index % 2 == 0 else list(reversed(cases))
            for collector, shape, batch in order:
                results[(collector, shape, batch)].append(
                    export_once(paths[shape], jaegers[collector], batch))
    spans = results[cases[0]][0]["spans"]
    print(f"opsight export of {spans:,} spans to Jaeger v2 (OTLP/HTTP protobuf, 2 requests in "
          f"flight), {options.rounds} interleaved rounds, medians")
    print(f"{'Jaeger':<14} {'run':<22} {'batch':>6} {'whole s':>8} {'sending s':>10} "
          f"{'spans/s whole':>14} {'spans/s sending':>16} {'all accepted':>13}")
    for collector, shape, batch in cases:
        rows = results[(collector, shape, batch)]
        whole = statistics.median(row["whole_s"] for row in rows)
        sending = statistics.median(row["sending_s"] for row in rows)
        complete = all(row["sent"] == row["spans"] == row["accepted"] for row in rows)
        print(f"{collector:<14} {shape:<22} {batch:>6} {whole:>8.2f} {sending:>10.2f} {spans / whole:>14,.0f} "
              f"{spans / sending:>16,.0f} {'yes' if complete else 'NO':>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
