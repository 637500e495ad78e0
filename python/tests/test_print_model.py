"""opsight.print_model and `opsight model`: golden text for a tiny BERT (repeated layers folded,
shapes of one forward) and a frozen-backbone model (frozen, partly frozen and trainable
marks, buffers, float16), the ASCII fallback, JSON, quantized weights, latencies from a
profile pooled over folded blocks, and the command's errors.

OPSIGHT_UPDATE_GOLDEN=1 rewrites the golden files (then read the diff before committing)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import clean_environment, require

torch = require("torch")
require("transformers")

import opsight  # noqa: E402
from opsight.model_view import model_tree  # noqa: E402

HERE = Path(__file__).with_name("explain_models")
GOLDEN = HERE / "golden"
ZOO = Path(__file__).resolve().parents[2] / "examples" / "explain"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ZOO))
import frozen  # noqa: E402
import models as zoo_models  # noqa: E402


def printed(model, **options) -> str:
    out = io.StringIO()
    opsight.print_model(model, file=out, **options)
    return out.getvalue()


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("OPSIGHT_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_bert_folded_with_the_shapes_of_one_forward():
    model, inputs = zoo_models.bert()
    text = printed(model, inputs=inputs, ascii=False)
    check_golden("bert.txt", text)
    assert "│  └─ layer.0–1 × 2 " in text


def test_frozen_backbone_marks_and_ascii_fallback():
    model, inputs = frozen.frozen_backbone()
    check_golden("frozen_backbone.txt", printed(model, inputs=inputs, ascii=False))
    ascii_text = printed(model, inputs=inputs, ascii=True)
    check_golden("frozen_backbone_ascii.txt", ascii_text)
    assert ascii_text.isascii()


def test_ascii_is_chosen_when_the_output_cannot_encode_the_marks():
    model, _ = frozen.frozen_backbone()
    raw = io.BytesIO()
    latin = io.TextIOWrapper(raw, encoding="latin-1")
    opsight.print_model(model, file=latin)
    latin.flush()
    assert "# frozen" in raw.getvalue().decode("latin-1")


def test_json_counts_cover_the_subtree_and_depth_cuts_the_children():
    model, inputs = frozen.frozen_backbone()
    out = io.StringIO()
    opsight.print_model(model, depth=1, inputs=inputs, format="json", file=out)
    tree = json.loads(out.getvalue())
    assert tree["parameters"] == sum(p.numel() for p in model.parameters())
    assert tree["trainable_parameters"] == sum(p.numel() for p in model.parameters()
                                               if p.requires_grad)
    assert tree["state"] == "partly frozen" and tree["dtypes"] == ["float16", "float32", "int64"]
    backbone = next(child for child in tree["children"] if child["name"] == "backbone")
    assert backbone["children"] == [] and backbone["state"] == "frozen"
    assert backbone["buffers"] == sum(b.numel() for b in model.backbone.buffers())
    assert tree["input_shapes"] == [[2, 3, 8, 8]] and tree["output_shapes"] == [[2, 4]]


def test_quantized_weights_are_counted_with_their_dtype():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), {torch.nn.Linear},
            dtype=torch.qint8)
        root = model_tree(model)
    linear = root.children[0]
    assert linear.quantization == "qint8 (dynamic)"
    assert linear.parameters == 8 * 8 + 8 and "qint8" in linear.dtypes


def test_latencies_from_a_profile_pool_the_folded_layers():
    model, inputs = zoo_models.bert()
    model.eval()
    with torch.no_grad():
        model(**inputs)
        with opsight.profile() as profile:
            for _ in range(5):
                model(**inputs)
    root = model_tree(model, profile=profile)
    assert root.latency.calls == 5 and root.latency.share == 1.0
    encoder = next(child for child in root.children if child.name == "encoder")
    layers = encoder.children[0]
    assert layers.name == "layer.0–1" and layers.repeat == 2
    assert layers.latency.calls == 10  # both layers, every call
    assert 0 < layers.latency.share <= encoder.latency.share <= 1
    assert layers.latency.p50_ns <= layers.latency.p99_ns
    attention = layers.children[0]
    assert attention.latency.calls == 10
    text = printed(model, profile=profile, depth=2, ascii=True)
    assert "p50 ms" in text and "layer.0-1 x 2" in text and "profile: 5 calls of BertModel" in text


def test_a_profile_without_the_model_is_an_error_that_says_why():
    model, _ = frozen.frozen_backbone()
    with opsight.profile() as profile:
        with opsight.span("unrelated"):
            pass
    with pytest.raises(ValueError, match="the profile has no module span of FrozenBackbone"):
        model_tree(model, profile=profile)


def run_model_command(*arguments: str, cwd: Path):
    return subprocess.run([sys.executable, "-m", "opsight", "model", *arguments], cwd=cwd,
                          capture_output=True, text=True, timeout=180, env=clean_environment())


def test_model_command_prints_the_tree_with_latencies(tmp_path):
    completed = run_model_command(f"{ZOO / 'models.py'}:bert", "--profile-runs", "3",
                                  "--depth", "2", "--ascii", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert "layer.0-1 x 2" in completed.stdout
    assert "profile: 3 calls of BertModel" in completed.stdout
    as_json = run_model_command(f"{HERE / 'frozen.py'}:frozen_backbone", "--format", "json",
                                cwd=tmp_path)
    assert json.loads(as_json.stdout)["class"] == "FrozenBackbone"


@pytest.mark.parametrize("arguments, status, message", [
    (["nowhere.py:f"], 1, "nowhere.py:f: no such file 'nowhere.py'"),
    (["plain-word"], 1, "plain-word: no such file, and not module:factory"),
    ([f"{HERE / 'frozen.py'}:missing"], 1, "has no attribute 'missing'"),
    ([f"{HERE / 'breaking.py'}:raises"], 1, "the factory raised RuntimeError"),
    ([f"{HERE / 'frozen.py'}:frozen_backbone", "--depth", "-1"], 64, "--depth -1: must be >= 0"),
])
def test_model_command_errors_are_messages(tmp_path, arguments, status, message):
    completed = run_model_command(*arguments, cwd=tmp_path)
    assert completed.returncode == status
    assert message in completed.stderr and "Traceback" not in completed.stderr
