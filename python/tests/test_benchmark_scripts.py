"""The Python benchmark scripts run end to end, briefly: the figures are not asserted (they
are benchmarks, not timed tests), only that each variant ran and is printed.
model_overhead.py also stops with an error unless every opsight variant recorded exactly
the operators and module calls of its forwards and dropped nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import require

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks" / "python"


def test_session_start_stop_times_every_variant():
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "session_start_stop.py"), "--sessions", "5"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for variant in ("thread start + join (baseline)", "opsight.profile(), in memory",
                    "opsight.profile(path), a file"):
        row = next((line for line in lines if line.startswith(variant)), None)
        assert row is not None and row.endswith("x"), result.stdout


def test_model_overhead_runs_every_variant_and_records_exactly_what_it_should():
    require("torch")
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "model_overhead.py"), "--rounds", "1", "--forwards",
         "2", "--settle", "1"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    counts = re.search(r"(\d+) operators and (\d+) modules per forward", out)
    assert counts and int(counts[1]) > 0 and int(counts[2]) > 0, out
    for variant in ("untraced", "torch's floor", "opsight, torch off", "opsight, switched off",
                    "opsight operators", "opsight modules", "opsight ops+modules",
                    "opsight sampled 1/1000", "torch.profiler"):
        # once in the wall-time table, once in the CPU-time table
        assert sum(line.startswith(variant + " ") for line in out.splitlines()) >= 2, variant
    assert "the overhead line (what the report says opsight cost)" in out
