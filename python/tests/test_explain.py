"""opsight explain: one model explained in process (graphs, breaks at the user's source lines,
outputs compared with eager), the zoo file's errors, the reports, the baseline gate with a
planted break, the metrics and log lines built for a Pushgateway and Loki, and the command
end to end in child processes (a crash and a hang do not stop the others, a bad TARGET is a
message, not a traceback). The real zoo and the real servers: tests/integration/test_explain_zoo.py."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_environment, require

torch = require("torch")

from opsight.explain import BreakSite, ModelExplain, explain_model  # noqa: E402
from opsight.explain.analyze import normalize_reason  # noqa: E402
from opsight.explain.gate import BaselineError, compare_with_baseline, load_baseline  # noqa: E402
from opsight.explain.publish import log_lines, metric_families  # noqa: E402
from opsight.explain.render import csv_report, json_report, text_report  # noqa: E402
from opsight.explain.zoo import ZooError, load_zoo  # noqa: E402

MODELS = Path(__file__).with_name("explain_models")
sys.path.insert(0, str(MODELS))
import breaking  # noqa: E402

BREAKING = str(MODELS / "breaking.py")


def explain(*arguments: str, cwd: Path, timeout: float = 240):
    return subprocess.run([sys.executable, "-m", "opsight", "explain", *arguments], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env=clean_environment())


def test_breaks_are_counted_at_the_users_source_lines_and_outputs_match_eager():
    model, inputs = breaking.branchy()
    result = explain_model(model, inputs, name="branchy", family="test")
    assert result.status == "ok", result.error
    assert (result.graphs, result.graph_breaks) == (3, 2)
    assert result.ops_per_graph == [2, 1, 1]  # linear+relu | mul | linear
    sites = {(Path(site.file).name, site.line): site for site in result.breaks}
    assert set(sites) == {("breaking.py", breaking.ITEM_LINE), ("breaking.py", breaking.PRINT_LINE)}
    item = sites[("breaking.py", breaking.ITEM_LINE)]
    assert "Tensor.item()" in item.reason and item.function == "forward" and item.count == 1
    assert all("site-packages/torch" not in frame for site in result.breaks for frame in site.stack)
    assert result.outputs_match is True and result.max_abs_difference == 0.0
    assert result.explain_seconds > 0 and result.compile_seconds > 0
    assert result.compile_peak_bytes is not None and result.compile_peak_bytes >= 0


def test_the_compile_memory_sampler_sees_a_peak_that_is_gone_by_the_end():
    """compile_peak_bytes comes from a sampling thread: a buffer allocated, held and freed
    inside the block is seen only if the thread samples (a dead sampler reads 0 here, as
    the end's reading is back down)."""
    import time

    from opsight.explain.analyze import _ResidentPeak

    held_bytes = 64 << 20
    with _ResidentPeak(interval_s=0.002) as memory:
        buffer = bytearray(held_bytes)
        buffer[::4096] = b"x" * len(buffer[::4096])  # touch every page: resident
        time.sleep(0.1)
        del buffer
    assert memory.peak_above_start is not None
    assert memory.peak_above_start >= held_bytes * 0.9, memory.peak_above_start


def test_a_model_that_raises_is_a_failed_result_not_an_exception():
    def broken(x):
        raise ValueError("shape mismatch")

    result = explain_model(broken, (torch.ones(2),), name="broken")
    assert result.status == "failed"
    assert result.error == "ValueError: shape mismatch"


def test_reasons_group_across_runs_without_object_addresses():
    assert (normalize_reason("call_function <object at 0x7f3a2b4c5d60> failed\nmore")
            == "call_function <object at 0x…> failed")


def test_zoo_file_targets_are_relative_to_it_and_limits_default(tmp_path):
    (tmp_path / "zoo.yaml").write_text("timeout: 30\nmodels:\n"
                                       "  - {name: a, family: f, target: m.py:make}\n"
                                       "  - {target: pkg.mod:factory, timeout: 5}\n")
    a, b = load_zoo(str(tmp_path / "zoo.yaml"))
    assert (a.name, a.family, a.target, a.timeout_s) == ("a", "f", f"{tmp_path}/m.py:make", 30)
    assert (b.name, b.target, b.timeout_s) == ("factory", "pkg.mod:factory", 5)


@pytest.mark.parametrize("text, message", [
    ("models:\n  - name: a\n", "zoo.yaml:2: models[0]: missing 'target'"),
    ("models:\n  - {target: m.py:f, colour: red}\n", "zoo.yaml:2: models[0]: unknown field 'colour'"),
    ("models:\n  - {target: m.py:f, timeout: soon}\n",
     "zoo.yaml:2: models[0].timeout: expected seconds, got 'soon'"),
    ("models:\n  - {target: nocolon}\n", "models[0].target: 'nocolon': expected module:factory"),
    ("models: [\n", "zoo.yaml:2: not valid YAML"),
    ("models: []\n", "zoo.yaml:1: models: expected a non-empty list"),
    ("models:\n  - {name: x, target: a:b}\n  - {name: x, target: c:d}\n",
     "zoo.yaml:3: models[1]: the name 'x' is already used at"),
    ("", "empty zoo file"),
])
def test_zoo_file_mistakes_name_the_line_and_field(tmp_path, text, message):
    (tmp_path / "zoo.yaml").write_text(text)
    with pytest.raises(ZooError) as raised:
        load_zoo(str(tmp_path / "zoo.yaml"))
    assert message in str(raised.value)


def _result(model: str, *sites: tuple[str, str, int, int], status: str = "ok") -> ModelExplain:
    breaks = [BreakSite(reason=reason, file=f"/src/{file}", line=line, function="forward",
                        count=count) for reason, file, line, count in sites]
    return ModelExplain(model=model, family="f", status=status, graphs=len(breaks) + 1,
                        graph_breaks=sum(site.count for site in breaks), ops=3,
                        ops_per_graph=[1] * (len(breaks) + 1), breaks=breaks,
                        explain_seconds=0.5, compile_seconds=0.25, compile_peak_bytes=2 << 20,
                        outputs_match=True)


def test_gate_lists_new_and_more_frequent_breaks_but_not_moved_lines():
    baseline = {"a": _result("a", ("item", "m.py", 10, 1)), "b": _result("b"),
                "c": _result("c")}
    now = [_result("a", ("item", "m.py", 14, 1), ("print", "m.py", 20, 1)),  # moved + new
           _result("b", ("item", "n.py", 3, 2)),
           _result("c", status="crashed"),
           _result("d", ("item", "x.py", 1, 1))]
    outcome = compare_with_baseline(now, baseline)
    assert [(item.model, item.site.reason, item.added) for item in outcome.new_breaks] == [
        ("a", "print", 1), ("b", "item", 2)]
    assert [result.model for result in outcome.newly_failing] == ["c"]
    assert outcome.not_in_baseline == ["d"] and outcome.failed
    assert "a: /src/m.py:20 in forward: print (+1)" in outcome.text()
    fixed = compare_with_baseline([_result("a")], baseline)
    assert not fixed.failed and fixed.fixed == 1


def test_baseline_mistakes_are_named(tmp_path):
    (tmp_path / "x.json").write_text('{"rows": []}')
    with pytest.raises(BaselineError, match="not an explain report"):
        load_baseline(str(tmp_path / "x.json"))
    (tmp_path / "y.json").write_text("{")
    with pytest.raises(BaselineError, match="not valid JSON"):
        load_baseline(str(tmp_path / "y.json"))
    with pytest.raises(BaselineError, match="neither an explain report nor a stored run"):
        load_baseline("no-such-run-or-file")


def test_reports_text_json_and_csv():
    results = [_result("a", ("item", "m.py", 10, 2)), _result("b"),
               ModelExplain(model="c", status="timeout", error="no result within 5 s")]
    text = text_report(results)
    assert text.splitlines()[0].split() == ["model", "family", "status", "graphs", "breaks",
                                            "ops/graph", "explain", "s", "compile", "s", "peak",
                                            "mem", "matches", "eager"]
    assert "a: 2 graph breaks at 1 site" in text and "2 x  /src/m.py:10 in forward" in text
    assert "c: timeout: no result within 5 s" in text
    assert json.loads(json_report(results))["models"][0]["breaks"][0]["line"] == 10
    assert [ModelExplain.from_dict(item) for item in json.loads(json_report(results))["models"]] \
        == results
    rows = list(csv.DictReader(io.StringIO(csv_report(results))))
    assert [(row["model"], row["break_reason"], row["break_count"]) for row in rows] == [
        ("a", "item", "2"), ("b", "", ""), ("c", "", "")]


def test_metrics_and_log_lines_per_reason_with_labels():
    results = [_result("a", ("item", "m.py", 10, 2), ("item", "m.py", 12, 1),
                       ("print", "m.py", 20, 1)), _result("b"),
               ModelExplain(model="c", family="f", status="crashed")]
    families = {name: samples for name, _, _, samples in metric_families(results, "abc")}
    breaks = {(dict(labels)["model"], dict(labels)["reason"]): value
              for labels, value in families["opsight_compile_graph_breaks_total"]}
    assert breaks == {("a", "item"): 3, ("a", "print"): 1, ("b", "none"): 0}
    assert all(dict(labels)["commit"] == "abc"
               for labels, _ in families["opsight_compile_graph_breaks_total"])
    assert {dict(labels)["model"]: value for labels, value in families["opsight_compile_graphs"]} \
        == {"a": 4, "b": 1}
    assert {dict(labels)["model"]: value
            for labels, value in families["opsight_explain_model_ok"]} == {"a": 1, "b": 1, "c": 0}
    lines = log_lines(results, "abc", now_ns=1000)
    assert [dict(labels)["reason"] for labels, _, _ in lines] == ["item", "item", "print"]
    assert json.loads(lines[0][2])["line"] == 10 and lines[0][1] == 1000


def test_command_explains_targets_in_child_processes_and_saves_the_run(tmp_path):
    completed = explain(f"{BREAKING}:branchy", f"{BREAKING}:plain", "--format", "json",
                        "--commit", "c0ffee", "--family", "tests", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    by_model = {item["model"]: item for item in report["models"]}
    assert (by_model["branchy"]["graphs"], by_model["branchy"]["graph_breaks"]) == (3, 2)
    assert (by_model["plain"]["graphs"], by_model["plain"]["graph_breaks"]) == (1, 0)
    assert "branchy" not in completed.stdout.split("\n")[0]  # the model's print went to the log
    assert "saved as run" in completed.stderr
    runs = subprocess.run([sys.executable, "-m", "opsight", "runs", "--format", "json"],
                          capture_output=True, text=True, env=clean_environment(), check=True)
    latest = json.loads(runs.stdout)[0]
    assert latest["tags"] == {"kind": "explain", "commit": "c0ffee", "model": "branchy,plain",
                              "family": "tests"}
    # The stored run is a baseline: the same models again add no breaks.
    again = explain(f"{BREAKING}:branchy", "--baseline", "latest", "--fail-on-new-breaks",
                    "--no-store", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "no new graph breaks since the baseline" in again.stderr


def test_a_planted_break_fails_the_gate_with_its_source_line(tmp_path):
    source = (MODELS / "breaking.py").read_text()
    model_file = tmp_path / "model.py"
    model_file.write_text(source)
    baseline = explain(f"{model_file}:branchy", "--output", str(tmp_path / "base.json"),
                       "--no-store", cwd=tmp_path)
    assert baseline.returncode == 0, baseline.stderr
    planted = source.replace('        print("branchy")\n',
                             '        print("branchy")\n'
                             '        hidden = hidden / max(1.0, hidden.max().item())\n')
    assert planted != source
    model_file.write_text(planted)
    gated = explain(f"{model_file}:branchy", "--baseline", str(tmp_path / "base.json"),
                    "--fail-on-new-breaks", "--no-store", cwd=tmp_path)
    assert gated.returncode == 3, gated.stderr
    assert "1 new graph break since the baseline" in gated.stderr
    assert f"branchy: {model_file}:{breaking.PRINT_LINE + 1} in forward: Unsupported Tensor.item()" \
        in gated.stderr


def test_a_crash_a_hang_and_a_failure_do_not_stop_the_zoo(tmp_path):
    (tmp_path / "zoo.yaml").write_text(
        f"timeout: 120\nmodels:\n"
        f"  - {{name: crash, target: '{BREAKING}:crashes'}}\n"
        f"  - {{name: hang, target: '{BREAKING}:hangs', timeout: 4}}\n"
        f"  - {{name: raise, target: '{BREAKING}:raises'}}\n"
        f"  - {{name: pair, target: '{BREAKING}:not_a_pair'}}\n"
        f"  - {{name: missing, target: '{BREAKING}:nowhere'}}\n"
        f"  - {{name: plain, target: '{BREAKING}:plain'}}\n")
    completed = explain("--zoo", str(tmp_path / "zoo.yaml"), "--jobs", "3", "--format", "json",
                        "--no-store", cwd=tmp_path)
    assert completed.returncode == 1, completed.stderr
    by_model = {item["model"]: item for item in json.loads(completed.stdout)["models"]}
    assert by_model["crash"]["status"] == "crashed"
    assert "killed by signal SIGABRT" in by_model["crash"]["error"]
    assert by_model["hang"]["status"] == "timeout"
    assert "time limit of 4 s" in by_model["hang"]["error"]
    assert by_model["raise"]["error"].endswith("the factory raised RuntimeError: the weights are missing")
    assert "must return (model_or_fn, example_inputs), got Linear" in by_model["pair"]["error"]
    assert "has no attribute 'nowhere'" in by_model["missing"]["error"]
    assert by_model["plain"]["status"] == "ok" and by_model["plain"]["graphs"] == 1
    assert [line.split("]")[0] for line in completed.stderr.splitlines() if line.startswith("[")] \
        == [f"[{index}/6" for index in range(1, 7)]


@pytest.mark.parametrize("arguments, message", [
    (["nocolon"], "nocolon: expected module:factory or file.py:factory"),
    (["missing.py:f"], "missing.py:f: no such file 'missing.py'"),
    ([], "nothing to explain"),
    (["--zoo", "nowhere.yaml"], "nowhere.yaml: cannot read the zoo file"),
    (["a:b", "--fail-on-new-breaks"], "--fail-on-new-breaks needs --baseline"),
    (["a:b", "--baseline", "nothing-here"], "--baseline nothing-here: neither"),
    (["a:b", "--push-gateway", "localhost:9091"], "expected an http:// or https:// URL"),
    (["a:b", "--jobs", "0"], "--jobs 0: must be >= 1"),
])
def test_bad_usage_is_a_message_not_a_traceback(tmp_path, arguments, message):
    completed = explain(*arguments, cwd=tmp_path, timeout=60)
    assert completed.returncode == 64
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("name", ["graph-breaks.yml", "Jenkinsfile"])
def test_the_ci_examples_use_the_commands_real_options(name):
    import re

    from opsight._cli.explain import _parser

    text = (Path(__file__).resolve().parents[2] / "examples" / "ci" / name).read_text()
    known = {option for action in _parser()._actions for option in action.option_strings}
    used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text))
    explain_options = used - {"--no-build-isolation"}
    assert {"--zoo", "--baseline", "--fail-on-new-breaks", "--push-gateway", "--loki",
            "--commit", "--output", "--jobs"} <= explain_options
    assert explain_options <= known
    assert "examples/explain/zoo.yaml" in text and "examples/explain/baseline.json" in text


def test_progress_lines_always_and_a_bar_on_a_terminal():
    from opsight.explain.runner import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    progress = Progress(terminal)
    assert progress.bar
    progress.tick(["t5", "whisper"], 3, 7)
    assert "\r\033[K[########------------]  3/7  " in terminal.getvalue()
    assert terminal.getvalue().endswith("running: t5, whisper")
    result = _result("gpt2")
    result.parent_seconds = 4.1
    progress.done(result, 4, 7)
    assert terminal.getvalue().endswith("\r\033[K[4/7] gpt2 (f)  ok  1 graph, 0 breaks  4.1 s\n")
    progress.close()

    log = io.StringIO()  # not a terminal (CI): the lines only
    piped = Progress(log)
    piped.tick(["t5"], 0, 7)
    piped.done(result, 1, 7)
    assert log.getvalue() == "[1/7] gpt2 (f)  ok  1 graph, 0 breaks  4.1 s\n"
