"""benchmarks/python/model_overhead.py runs end to end (one short round): every opsight
variant must record exactly the operators and module calls of its forwards and drop nothing,
or the script exits non-zero; the figures themselves are not asserted here (a benchmark,
not a timed test), only that each variant and the overhead-line comparison are printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import require

require("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "python" / "model_overhead.py"


def test_every_variant_runs_and_records_exactly_what_it_should():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "1", "--forwards", "2", "--settle", "1"],
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
