"""The always-on preset (``opsight run --production``, ``OPSIGHT_PRESET=production``;
docs/production.md): its choices are visible in the run it writes (every request, the
operators of 1 in 100, the flight recorder, counters once a second), and an option given
explicitly wins over it."""

from __future__ import annotations

import pytest

import opsight._native as _native
from opsight._session import preset

from conftest import PYTHON, opsight_run, require, run, write

APP = """
    import torch
    import opsight

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    x = torch.ones(2, 8)

    @opsight.trace
    def handle(i):
        with torch.no_grad():
            return model(x)

    for i in range(200):
        handle(i)
"""


def names(path):
    return list(_native.read_trace(str(path)).slice_columns()["name"])


def test_the_production_preset_records_every_request_and_the_operators_of_a_sample(tmp_path):
    require("torch")
    write(tmp_path, "app.py", APP)
    result = opsight_run(["--production", "-o", "run.opsight", "--no-store", "--report",
                          "summary", "--", PYTHON, "app.py"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    recorded = names(tmp_path / "run.opsight")
    assert sum(name.endswith("handle") for name in recorded) == 200
    linear = sum(name == "aten::linear" for name in recorded)
    assert linear == 2, recorded.count("aten::linear")  # units 0 and 100
    extra = dict(_native.read_trace(str(tmp_path / "run.opsight")).run_info()["extra"])
    assert extra["sampling"] == "operators in 1 in 100 of root spans"
    # 200 requests, and the operators run outside them (the model's initialisation): each
    # a unit, left out whole but 1 in 100.
    assert int(extra["sampling_units"]) >= 200
    assert extra["ring_max_age_ns"] == "60000000000"
    assert extra["sampler_interval_ns"] == "1000000000"
    assert "flight recorder (ring 60.000 s" in result.stderr


def test_an_explicit_option_wins_over_the_preset(tmp_path):
    require("torch")
    write(tmp_path, "app.py", APP)
    result = opsight_run(["--production", "--sample", "1/50", "--ring", "30s", "--sample-ms",
                          "0", "-o", "run.opsight", "--no-store", "--report", "none", "--",
                          PYTHON, "app.py"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    extra = dict(_native.read_trace(str(tmp_path / "run.opsight")).run_info()["extra"])
    assert extra["sampling"] == "operators in 1 in 50 of root spans"
    assert extra["ring_max_age_ns"] == "30000000000"
    assert "sampler_interval_ns" not in extra


def test_opsight_preset_in_the_environment_applies_to_an_output_session(tmp_path):
    write(tmp_path, "app.py", """
        import opsight

        @opsight.trace
        def handle(i):
            return i

        for i in range(10):
            handle(i)
    """)
    result = run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="run.opsight",
                 OPSIGHT_PRESET="production")
    assert result.returncode == 0, result.stderr
    extra = dict(_native.read_trace(str(tmp_path / "run.opsight")).run_info()["extra"])
    assert extra["dump_trigger"] == "session end"
    assert extra["sampling"] == "operators in 1 in 100 of root spans"
    result = run([PYTHON, "app.py"], tmp_path, OPSIGHT_OUTPUT="other.opsight",
                 OPSIGHT_PRESET="staging")
    assert "ignoring OPSIGHT_PRESET: unknown preset 'staging'" in result.stderr


def test_unknown_presets_are_named():
    with pytest.raises(ValueError, match="unknown preset 'fast'"):
        preset.apply("fast", {})
    environment = {"OPSIGHT_RING": "5m"}
    assert "OPSIGHT_RING" not in preset.apply("production", environment)
    assert environment["OPSIGHT_RING"] == "5m"
