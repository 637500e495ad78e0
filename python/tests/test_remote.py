"""opsight.remote without a cluster: back-end specs, the price table, the cost formula, that
``import opsight`` never imports Ray, and the commands' usage errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_environment, write
from opsight.exit_codes import USAGE_ERROR
from opsight.remote import (BackendSpec, RemoteError, SpecError, cost_per_million, load_prices,
                            parse_spec, parse_specs)

REPOSITORY = Path(__file__).resolve().parents[2]


def test_spec_is_hardware_slash_backend_and_keeps_the_users_words():
    spec = parse_spec("r6i.large/onnxruntime")
    assert spec == BackendSpec("r6i.large", "onnxruntime")
    assert spec.canonical == "ort-cpu" and str(spec) == "r6i.large/onnxruntime"
    assert parse_spec("nodeA", default_backend="eager") == BackendSpec("nodeA", "eager")
    assert [str(spec) for spec in parse_specs("a/eager, b/torchscript")] == \
        ["a/eager", "b/torchscript"]


@pytest.mark.parametrize("text, words", [
    ("nodeA", "expected HARDWARE/BACKEND"),
    ("/eager", "hardware label ''"),
    ("node A/eager", "hardware label 'node A'"),
    ("nodeA/tvm", "unknown back-end 'tvm'"),
    ("nodeA/eager/x", "expected HARDWARE/BACKEND"),
])
def test_a_bad_spec_names_the_part_at_fault(text, words):
    with pytest.raises(SpecError, match=None) as caught:
        parse_spec(text)
    assert words in str(caught.value) and repr(text) in str(caught.value)


def test_the_same_backend_twice_on_one_hardware_is_refused():
    with pytest.raises(SpecError, match="given twice"):
        parse_specs(["a/ort-cpu", "a/onnxruntime"])
    with pytest.raises(SpecError, match="no remote back-end"):
        parse_specs([])


def test_the_example_price_table_loads_with_its_sources():
    table = load_prices(REPOSITORY / "examples" / "remote" / "prices.yaml")
    assert table.currency == "USD"
    assert table.price("r6i.large") == 0.126 and table.price("g4dn.xlarge") == 0.526
    assert "aws.amazon.com" in table.sources["r6i.large"]
    assert table.price("nowhere") is None


@pytest.mark.parametrize("text, words", [
    ("hardware: [1, 2]\n", "'hardware' mapping"),
    ("hardware:\n  a: {per_hour: -1}\n", "hardware 'a': per_hour: the price per hour must be"),
    ("hardware:\n  a: {price: 1}\n", "unknown field 'price'"),
    ("hardware:\n  a: {source: x}\n", "per_hour is missing"),
    ("hardware:\n  a: cheap\n", "hardware 'a': the price per hour must be"),
    ("hardware:\n  a: 1\ncurrencies: EUR\n", "unknown field 'currencies'"),
    ("hardware: {a: 1\n", "not YAML"),
])
def test_a_bad_price_table_names_the_file_and_field(tmp_path, text, words):
    path = write(tmp_path, "prices.yaml", text)
    with pytest.raises(RemoteError) as caught:
        load_prices(path)
    assert str(path) in str(caught.value) and words in str(caught.value)
    with pytest.raises(RemoteError, match="cannot read the price table"):
        load_prices(tmp_path / "missing.yaml")


def test_cost_per_million_is_time_times_price():
    # 2 ms a request at $3.6 an hour: 2e-3 s x 1e6 x 3.6 / 3600 = $2.
    assert cost_per_million(3.6, 2e-3) == pytest.approx(2.0)
    assert cost_per_million(None, 1.0) is None and cost_per_million(1.0, None) is None


def test_import_opsight_never_imports_ray():
    code = ("import sys, opsight, opsight.remote, opsight.torch, opsight.bench, "
            "opsight.compare_backends; print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_environment(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_bench_on_without_cluster_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "opsight", "bench", "m.onnx", "--on",
                           "nodeA/ort-cpu"], capture_output=True, text=True, cwd=tmp_path,
                          env=clean_environment(), timeout=120)
    assert done.returncode == USAGE_ERROR
    assert "--cluster ADDRESS and --on HARDWARE[/BACKEND] go together" in done.stderr


def test_a_malformed_cluster_address_is_a_clear_error():
    from opsight.remote.cluster import connect

    with pytest.raises(RemoteError, match="expected ray://HOST:PORT"):
        connect("head-node", ["a"])
