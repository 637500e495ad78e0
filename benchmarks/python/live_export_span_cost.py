"""What a span costs the traced program's thread while its spans stream out (docs/export.md,
*Speed*): the same program under ``opsight run`` with ``--export-live`` to a real Jaeger
and without export, in interleaved rounds.

The program times SPANS empty spans (``with opsight.span("step"): pass``) in a loop with
``time.perf_counter_ns`` and prints the cost per span; the export runs in the ``opsight run``
process, which follows the program's file, so the program's thread should pay nothing
more. Medians over rounds, and the ratio of the two.

    .venv/bin/python benchmarks/python/live_export_span_cost.py [--spans 1000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import real_servers  # noqa: E402  (the tests' server management: same binaries, same config)

PROGRAM = textwrap.dedent("""
    import json, sys, time
    import opsight

    spans = int(sys.argv[1])
    span = opsight.span
    start = time.perf_counter_ns()
    for _ in range(spans):
        with span("step"):
            pass
    elapsed = time.perf_counter_ns() - start
    print(json.dumps({"ns_per_span": elapsed / spans}), flush=True)
""")


def run_once(script: Path, folder: str, spans: int, export: str | None) -> float:
    command = [sys.executable, "-m", "opsight", "run", "--no-store", "--report", "none", "-o",
               str(Path(folder) / "out.opsight")]
    if export:
        command += ["--export-live", "--export", export]
    done = subprocess.run(command + ["--", sys.executable, str(script), str(spans)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or (export and "dropped" in done.stderr):
        raise SystemExit(f"opsight run failed or dropped: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])["ns_per_span"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, real_servers.jaeger(store=False) as jaeger:
        script = Path(folder) / "program.py"
        script.write_text(PROGRAM)
        variants = {"recording alone": None,
                    "live export to Jaeger": f"otlp={jaeger.otlp_http_endpoint}"}
        results: dict[str, list[float]] = {name: [] for name in variants}
        for round_index in range(options.rounds):
            order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
            for name in order:
                results[name].append(run_once(script, folder, options.spans, variants[name]))
    base = statistics.median(results["recording alone"])
    print(f"{options.spans:,} empty Python spans per run, {options.rounds} interleaved rounds, "
          "medians (the program's own clock around its loop)")
    for name, values in results.items():
        median = statistics.median(values)
        print(f"  {name:<24} {median:7.1f} ns/span  {median / base:6.3f}x  "
              f"(rounds {min(values):.1f}-{max(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
