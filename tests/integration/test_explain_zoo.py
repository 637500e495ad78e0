"""opsight explain over the real zoo (examples/explain/zoo.yaml: transformers' BERT, GPT-2, T5,
ViT, Whisper and ResNet from tiny configs, and a model known to break), once, with its
metrics pushed to the real Pushgateway, scraped by the real Prometheus, and its break lines
sent to VictoriaLogs through Loki's push API:

- every model's graph and break counts are exactly the ones recorded here (a change of
  torch, transformers or opsight that moves them shows up as a failure to look at);
- the committed CI baseline (examples/explain/baseline.json) passes the gate;
- every PromQL query of the Grafana dashboard (examples/grafana/opsight-explain.json) returns
  the expected series from Prometheus, and its log panel's stream selector finds the break
  lines in VictoriaLogs.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

import real_servers
from real_servers import pushgateway_server, victorialogs_server  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "examples" / "explain" / "zoo.yaml"
DASHBOARD = ROOT / "examples" / "grafana" / "opsight-explain.json"
BASELINE = ROOT / "examples" / "explain" / "baseline.json"

#: (graphs, breaks, ops per graph) of each zoo model, recorded once with torch 2.15.0 and
#: transformers 5.23.0.
EXPECTED = {
    "bert": (1, 0, [53]),
    "gpt2": (1, 0, [74]),
    "t5": (1, 0, [174]),
    "vit": (1, 0, [36]),
    "whisper": (1, 0, [119]),
    "resnet": (1, 0, [21]),
    "early-exit": (3, 2, [2, 1, 1]),
}
FAMILIES = {"bert": "encoder", "gpt2": "decoder", "t5": "encoder-decoder", "vit": "vision",
            "whisper": "audio", "resnet": "convolution", "early-exit": "known-breaks"}


def _require_transformers():
    try:
        import transformers  # noqa: F401
    except ImportError as error:
        if "transformers" in os.environ.get("OPSIGHT_REQUIRE", "").split(","):
            pytest.fail(f"transformers is required (OPSIGHT_REQUIRE) but cannot be imported: "
                        f"{error}", pytrace=False)
        pytest.skip(f"transformers is not installed ({error}); OPSIGHT_REQUIRE=transformers "
                    "makes this a failure")


@pytest.fixture(scope="module")
def zoo_run(opsight_cli, pushgateway_server, victorialogs_server):  # noqa: F811
    _require_transformers()
    home = tempfile.mkdtemp(prefix="opsight-explain-home-")
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("OPSIGHT_")}
    environment["OPSIGHT_HOME"] = home
    completed = opsight_cli("explain", "--zoo", ZOO, "--jobs", "2", "--format", "json",
                            "--commit", "testcommit", "--push-gateway", pushgateway_server.url,
                            # VictoriaLogs splits a JSON line into fields; _msg_field names
                            # the one that is the message.
                            "--loki", f"{victorialogs_server.loki_push_url}?_msg_field=reason",
                            timeout=600,
                            env=environment)
    assert completed.returncode == 0, completed.stderr[-3000:]
    yield json.loads(completed.stdout), completed.stderr
    # The servers are shared with the other tests of the session: take the group away.
    real_servers.http_request(f"{pushgateway_server.url}/metrics/job/opsight_explain",
                              method="DELETE")


def test_every_zoo_model_has_its_recorded_graphs_and_breaks(zoo_run):
    report, stderr = zoo_run
    got = {model["model"]: (model["graphs"], model["graph_breaks"], model["ops_per_graph"])
           for model in report["models"]}
    assert got == EXPECTED
    for model in report["models"]:
        assert model["status"] == "ok" and model["outputs_match"] is True, model
        assert model["family"] == FAMILIES[model["model"]]
    early = next(model for model in report["models"] if model["model"] == "early-exit")
    assert [(Path(site["file"]).name, site["line"]) for site in early["breaks"]] == [
        ("models.py", 100), ("models.py", 103)]
    assert re.search(r"\[7/7\] \S+ \(", stderr)  # progress, one line per model
    assert "saved as run" in stderr


def test_the_committed_ci_baseline_passes_the_gate(zoo_run):
    from opsight.explain.gate import compare_with_baseline, load_baseline
    from opsight.explain.result import ModelExplain

    report, _ = zoo_run
    outcome = compare_with_baseline([ModelExplain.from_dict(item) for item in report["models"]],
                                    load_baseline(str(BASELINE)))
    assert not outcome.failed, outcome.text()
    assert outcome.not_in_baseline == []


def _prometheus_queries(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"]
            if panel["datasource"]["type"] == "prometheus" for target in panel["targets"]]


def test_the_dashboards_queries_return_the_breaks_from_prometheus(zoo_run, pushgateway_server):  # noqa: F811
    exposed = pushgateway_server.metrics_text()
    assert "# TYPE opsight_compile_graph_breaks_total counter" in exposed
    checked = real_servers.promtool_check_metrics(exposed)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    dashboard = json.loads(DASHBOARD.read_text())
    queries = _prometheus_queries(dashboard)
    assert len(queries) == 7
    target = pushgateway_server.url.removeprefix("http://")
    with real_servers.prometheus(scrape_targets=[target], job="pushgateway") as prometheus:
        prometheus.wait_for("opsight_compile_graphs")
        answers = {}
        for query in queries:
            # The dashboard's $family variable at "All".
            promql = query.replace('"$family"', '".*"')
            answers[query] = {tuple(sorted((k, v) for k, v in sample["metric"].items()
                                           if k != "__name__")): float(sample["value"][1])
                              for sample in prometheus.query(promql)}
    by = {query.split("(")[0] + query.split("(")[1].split(")")[0]: answer
          for query, answer in answers.items()}
    assert by["sum by family"][(("family", "known-breaks"),)] == 2
    assert by["sum by family"][(("family", "encoder"),)] == 0
    assert len(by["sum by family"]) == 7
    assert by["sum by model"][(("model", "early-exit"),)] == 2
    reasons = {labels[0][1]: value for labels, value in by["sum by reason"].items()}
    assert reasons["Unsupported Tensor.item() call with capture_scalar_outputs=False"] == 1
    assert reasons["Failed to trace builtin operator"] == 1 and reasons["none"] == 0
    graphs = answers['max by (model) (opsight_compile_graphs{family=~"$family"})']
    assert {labels[0][1]: value for labels, value in graphs.items()} == {
        name: expected[0] for name, expected in EXPECTED.items()}
    seconds = answers['max by (model) (opsight_compile_seconds{family=~"$family"})']
    assert len(seconds) == 7 and all(value > 0 for value in seconds.values())
    peaks = answers['max by (model) (opsight_compile_peak_bytes{family=~"$family"})']
    assert len(peaks) == 7 and all(value >= 0 for value in peaks.values())
    failing = answers['count(opsight_explain_model_ok{family=~"$family"} == 0) or vector(0)']
    assert list(failing.values()) == [0]


def test_break_lines_reach_the_loki_api_store(zoo_run, victorialogs_server):  # noqa: F811
    dashboard = json.loads(DASHBOARD.read_text())
    selector, = [target["expr"] for panel in dashboard["panels"]
                 if panel["datasource"]["type"] == "loki" for target in panel["targets"]]
    rows = victorialogs_server.wait_for(selector.replace('"$family"', '".*"'), count=2)
    assert sorted((row["model"], row["family"], row["reason"]) for row in rows) == [
        ("early-exit", "known-breaks", "Failed to trace builtin operator"),
        ("early-exit", "known-breaks",
         "Unsupported Tensor.item() call with capture_scalar_outputs=False")]
    # The line's JSON fields, as VictoriaLogs split them (every value as text).
    lines = sorted(rows, key=lambda row: int(row["line"]))
    assert [(Path(row["file"]).name, row["line"], row["function"], row["commit"], row["count"],
             row["_msg"]) for row in lines] == [
        ("models.py", "100", "forward", "testcommit", "1",
         "Unsupported Tensor.item() call with capture_scalar_outputs=False"),
        ("models.py", "103", "forward", "testcommit", "1", "Failed to trace builtin operator")]
