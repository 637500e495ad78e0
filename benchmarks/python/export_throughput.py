"""End-to-end export throughput to a real collector (docs/export.md, *End to end to a real
collector*): ``opsight export`` of a stored run to Jaeger v2 on this machine, over
OTLP/HTTP protobuf, timed whole (the command, start to stop, as a user pays it) and for
the sending alone (the export report's seconds).

Two runs of the same size, recorded once with ``opsight.profile``:

- **one trace**: REQUESTS requests of 2 spans, all in the run's trace (a batch job);
- **a trace per request**: the same requests, each served as a server serves a request
  without a ``traceparent`` (``opsight.propagation.continue_trace({})``): a trace of its
  own.

Each is sent at several batch sizes with the default two requests in flight, to two
Jaegers on this machine: one that stores the spans in memory (queryable, as the tests use
it) and one that receives, decodes and counts them but discards them (its ``nop``
exporter: the collector's receiving cost alone). Rounds are interleaved and the figures
are medians. Jaeger's receiver must count every span
(``otelcol_receiver_accepted_spans_total``), or the row says so. The collector shares the
machine's cores with the sender. ``--compressions none,gzip`` sends each case both plain and
gzip-compressed (``OTEL_EXPORTER_OTLP_COMPRESSION``), and ``--protocols http,grpc`` both
over OTLP/HTTP and over OTLP/gRPC (Jaeger's gRPC receiver; "MB sent" is the messages as
sent, gzip-compressed by the sender on both), interleaved in the same rounds.

    .venv/bin/python benchmarks/python/export_throughput.py [--requests 100000] [--rounds 3]
        [--batch-sizes 512,2048,4096] [--compressions none[,gzip]] [--protocols http[,grpc]]
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
                    with continue_trace({}):  # no traceparent: a trace of its own
                        with opsight.span("model"):
                            pass
                else:
                    with opsight.span("model"):
                        pass
""")

SHAPES = {"one trace": "0", "a trace per request": "1"}
BATCH_SIZES = (512, 2048, 4096)


def export_once(path: Path, jaeger, batch: int, compression: str, protocol: str) -> dict:
    before = jaeger.accepted_spans()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    environment["OTEL_EXPORTER_OTLP_COMPRESSION"] = compression
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "opsight", "export", str(path), "--to",
         f"otlp-grpc=http://{jaeger.otlp_grpc_endpoint}" if protocol == "grpc"
         else f"otlp={jaeger.otlp_http_endpoint}", "--batch-size", str(batch), "--format", "json"],
        capture_output=True, text=True, timeout=600, env=environment)
    whole = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"opsight export failed: {done.stderr}")
    report = json.loads(done.stdout)[0]
    time.sleep(0.5)  # the receiver's count settles
    return {"whole_s": whole, "sending_s": report["seconds"], "spans": report["spans"],
            "sent": report["sent"], "bytes": report["bytes"],
            "accepted": jaeger.accepted_spans() - before}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    parser.add_argument("--compressions", default="none",
                        help="comma list of OTEL_EXPORTER_OTLP_COMPRESSION values: none, gzip")
    parser.add_argument("--protocols", default="http",
                        help="comma list of OTLP transports: http (protobuf), grpc")
    options = parser.parse_args()
    protocols = [name.strip() for name in options.protocols.split(",")]
    batch_sizes = [int(size) for size in options.batch_sizes.split(",")]
    compressions = [name.strip() for name in options.compressions.split(",")]
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
        cases = [(collector, shape, batch, compression, protocol) for collector in jaegers
                 for shape in SHAPES for batch in batch_sizes for compression in compressions
                 for protocol in protocols]
        results: dict[tuple, list[dict]] = {case: [] for case in cases}
        for round_index in range(options.rounds):
            order = cases if round_index % 2 == 0 else list(reversed(cases))
            for collector, shape, batch, compression, protocol in order:
                results[(collector, shape, batch, compression, protocol)].append(
                    export_once(paths[shape], jaegers[collector], batch, compression, protocol))
    spans = results[cases[0]][0]["spans"]
    print(f"opsight export of {spans:,} spans to Jaeger v2 (OTLP protobuf, 2 requests in "
          f"flight), {options.rounds} interleaved rounds, medians")
    print(f"{'Jaeger':<14} {'run':<22} {'batch':>6} {'via':>4} {'body':>5} {'MB sent':>8} "
          f"{'whole s':>8} "
          f"{'sending s':>10} {'spans/s whole':>14} {'spans/s sending':>16} {'all accepted':>13}")
    for collector, shape, batch, compression, protocol in cases:
        rows = results[(collector, shape, batch, compression, protocol)]
        whole = statistics.median(row["whole_s"] for row in rows)
        sending = statistics.median(row["sending_s"] for row in rows)
        megabytes = statistics.median(row["bytes"] for row in rows) / 1e6
        complete = all(row["sent"] == row["spans"] == row["accepted"] for row in rows)
        print(f"{collector:<14} {shape:<22} {batch:>6} {protocol:>4} {compression:>5} "
              f"{megabytes:>8.1f} "
              f"{whole:>8.2f} {sending:>10.2f} {spans / whole:>14,.0f} {spans / sending:>16,.0f} "
              f"{'yes' if complete else 'NO':>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
