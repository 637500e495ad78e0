"""`opsight demo`: the real-model demo end to end (the command `make demo` runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import require

require("torch")


def test_demo_profiles_a_real_model_and_benchmarks_it(tmp_path):
    env = {**os.environ, "OPSIGHT_HOME": str(tmp_path / "home")}
    env.pop("OPSIGHT_OUTPUT", None)
    result = subprocess.run(
        [sys.executable, "-m", "opsight", "demo", "--requests", "3", "--bench-iterations", "5"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # The tree: Python spans > modules, operators folded below the cut.
    for expected in ("handle_request", "├─ tokenize", "infer", "TinyBert",
                     "encoder.layer.0.attention", "nested)"):
        assert expected in out, expected
    # The breakdown, the operator table, the summary, the bench on two back-ends.
    assert "3 inferences of 'handle_request'" in out
    assert "aten::addmm" in out and "aten::native_layer_norm" in out
    assert out.count("opsight bench: TinyBert") == 2
    assert "on eager" in out and "on torchscript" in out
    trace = json.loads((tmp_path / "opsight-demo.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"handle_request", "encoder.layer.1.output", "aten::bmm"} <= names
    assert (tmp_path / "opsight-demo.opsight").stat().st_size > 0
    runs = subprocess.run([sys.executable, "-m", "opsight", "runs", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    stored = json.loads(runs.stdout)
    stored = stored["runs"] if isinstance(stored, dict) else stored
    assert len(stored) == 3  # the profile and one bench per back-end


def test_demo_refuses_bad_options(tmp_path):
    result = subprocess.run([sys.executable, "-m", "opsight", "demo", "--requests", "0"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 64 and "--requests" in result.stderr
