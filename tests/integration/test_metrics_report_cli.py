"""`opsight report --metrics` and metrics in `--tree` and `--summary`, by the built CLI, on
a Chrome JSON trace written here: spans with "metric.*" args, "ph": "C" counter events and
the metric costs opsight's writer keeps under otherData.extra. Expected numbers are
computed here (numpy for percentiles, a step function for counter means)."""
import json

import numpy
import pytest

GIB = 1 << 30
MIB = 1 << 20

LOAD_METRICS = {"metric.cpu_ns": 10_100_000, "metric.rss_delta_bytes": 12 * MIB,
                "metric.rss_peak_bytes": 1_288_490_189, "metric.io_read_bytes": 4 * MIB,
                "metric.net_sent_bytes": 1024}
STEPS = [  # (start µs, duration µs, cpu_ns, gpu_power_watts)
    (14_000, 5_000, 4_000_000, 250.5),
    (19_200, 500, 2_000_000, 100.25),
]
COUNTERS = {  # track -> [(ts µs, value)]
    "process.rss_bytes": [(0, 1 * GIB), (10_000, 1.5 * GIB), (20_000, 1.25 * GIB)],
    "gpu0.utilization_percent": [(0, 50), (5_000, 100), (15_000, 0)],
}
METRIC_COST = {"metric_cost.memory": "2000 700000", "metric_cost.cpu": "1000 300000",
               "metric_cost.sampler": "40 90000", "sampler_interval_ns": "100000000"}


def _span(name, start_us, duration_us, args=None):
    event = {"ph": "X", "name": name, "cat": "python", "pid": 1, "tid": 1, "ts": start_us,
             "dur": duration_us}
    if args:
        event["args"] = args
    return event


@pytest.fixture(scope="module")
def metrics_trace(tmp_path_factory):
    events = [_span("train", 0, 20_000), _span("load_batch", 1_000, 12_300, LOAD_METRICS)]
    for start, duration, cpu_ns, watts in STEPS:
        events.append(_span("step", start, duration, {"metric.cpu_ns": cpu_ns,
                                                      "metric.gpu_power_watts": watts,
                                                      "batch": 3}))
    for track, samples in COUNTERS.items():
        events += [{"ph": "C", "name": track, "pid": 1, "ts": ts, "args": {"value": value}}
                   for ts, value in samples]
    document = {"traceEvents": events,
                "otherData": {"writer": "opsight", "source_format": "opsight",
                              "overhead_ns": 1_200_000, "traced_ns": 20_000_000,
                              "extra": METRIC_COST}}
    path = tmp_path_factory.mktemp("metrics") / "metrics.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _time_weighted_mean(samples):
    """Each sample holds until the next; the last one has no duration."""
    span = samples[-1][0] - samples[0][0]
    weighted = sum(value * (samples[i + 1][0] - ts) for i, (ts, value) in enumerate(samples[:-1]))
    return weighted / span


def _report(opsight_cli, *args):
    completed = opsight_cli("report", *args)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_metrics_json_has_counters_span_metrics_and_cost(opsight_cli, metrics_trace):
    document = json.loads(_report(opsight_cli, metrics_trace, "--metrics", "--format", "json"))
    counters = {counter["name"]: counter for counter in document["counters"]}
    assert set(counters) == set(COUNTERS)
    for name, samples in COUNTERS.items():
        values = [value for _, value in samples]
        assert counters[name]["samples"] == len(samples)
        assert counters[name]["min"] == min(values)
        assert counters[name]["max"] == max(values)
        assert counters[name]["mean"] == pytest.approx(_time_weighted_mean(samples))
        assert counters[name]["unit"] == ("bytes" if name.endswith("_bytes") else "percent")

    rows = {(row["name"], row["metric"]): row for row in document["span_metrics"]}
    cpu = [cpu_ns for _, _, cpu_ns, _ in STEPS]
    watts = [power for _, _, _, power in STEPS]
    assert rows["step", "cpu_ns"]["count"] == 2
    assert rows["step", "cpu_ns"]["mean"] == numpy.mean(cpu)
    assert rows["step", "cpu_ns"]["p99"] == pytest.approx(numpy.percentile(cpu, 99), abs=0.05)
    assert rows["step", "gpu_power_watts"]["unit"] == "watts"
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert rows["step", "gpu_power_watts"][key] == pytest.approx(numpy.percentile(watts, q),
                                                                     abs=1e-3)
    assert rows["load_batch", "rss_delta_bytes"]["max"] == 12 * MIB
    assert ("step", "batch") not in rows  # a plain argument is not a metric

    assert document["sampler_interval_ns"] == 100_000_000
    assert document["metric_cost"] == {
        "span_metrics_ns": 1_000_000,
        "groups": {"memory": {"readings": 2000, "total_ns": 700_000},
                   "cpu": {"readings": 1000, "total_ns": 300_000}},
        "sampler": {"samples": 40, "total_ns": 90_000}}


def test_metrics_text_and_csv(opsight_cli, metrics_trace):
    text = _report(opsight_cli, metrics_trace, "--metrics")
    lines = text.splitlines()
    assert lines[0] == "opsight metrics: metrics.json, 4 slices, 20.0 ms"
    assert lines[1] == "counters (mean: time-weighted; sampled every 100 ms)"
    assert lines[3].split() == ["gpu0.utilization_percent", "percent", "3", "0.0%", "83.3%",
                                "100.0%"]
    assert lines[4].split() == ["process.rss_bytes", "bytes", "3", "1.0", "GiB", "1.2", "GiB",
                                "1.5", "GiB"]
    assert "metrics per span" in lines
    assert ("metric cost (part of the tracer overhead): memory 2000 readings in 700 µs "
            "(350 ns each), cpu 1000 readings in 300 µs (300 ns each)") in lines
    assert lines[-1] == ("tracer overhead: 1.20 ms (6.00% of 20.0 ms traced; metrics 1.00 ms of "
                         "it: memory 700 µs, cpu 300 µs; sampler 90.0 µs on its own thread), "
                         "0 events dropped")

    csv = _report(opsight_cli, metrics_trace, "--metrics", "--format", "csv").splitlines()
    assert csv[0] == "kind,name,pid,metric,unit,count,total,mean,min,p50,p90,p99,max"
    assert "span,step,,cpu_ns,ns,2,6000000,3000000,2000000,3000000,3800000,3980000,4000000" in csv


def test_tree_shows_each_spans_metrics(opsight_cli, metrics_trace):
    text = _report(opsight_cli, metrics_trace, "--tree")
    load_line = next(line for line in text.splitlines() if "load_batch" in line)
    assert load_line.endswith(
        "cpu 10.1 ms · rss +12.0 MiB (peak 1.2 GiB) · read 4.0 MiB · sent 1.0 KiB")
    train_line = next(line for line in text.splitlines() if line.startswith("train"))
    assert train_line.endswith("20.0 ms")  # no metrics, nothing after the end column

    tree = json.loads(_report(opsight_cli, metrics_trace, "--tree", "--format", "json"))
    train = tree["roots"][0]
    assert "metrics" not in train
    load = train["children"][0]
    assert load["metrics"] == {key.removeprefix("metric."): value
                               for key, value in LOAD_METRICS.items()}
    assert train["children"][1]["metrics"] == {"cpu_ns": 4_000_000, "gpu_power_watts": 250.5}

    csv = _report(opsight_cli, metrics_trace, "--tree", "--format", "csv").splitlines()
    header = csv[0].split(",")
    assert header[7:] == ["metric.cpu_ns", "metric.rss_delta_bytes", "metric.rss_peak_bytes",
                          "metric.io_read_bytes", "metric.net_sent_bytes",
                          "metric.gpu_power_watts"]


def test_summary_text_adds_metrics_json_stays_a_plain_list(opsight_cli, metrics_trace):
    text = _report(opsight_cli, metrics_trace, "--summary")
    assert "\nmetrics per span\n" in text
    summary = json.loads(_report(opsight_cli, metrics_trace, "--summary", "--format", "json"))
    assert isinstance(summary, list)
    assert all("metrics" not in row for row in summary)


def test_converted_to_native_the_metrics_are_the_same(opsight_cli, metrics_trace, tmp_path):
    native = tmp_path / "metrics.opsight"
    completed = opsight_cli("convert", metrics_trace, native)
    assert completed.returncode == 0, completed.stderr
    from_json = json.loads(_report(opsight_cli, metrics_trace, "--metrics", "--format", "json"))
    from_native = json.loads(_report(opsight_cli, native, "--metrics", "--format", "json"))
    # The native format keeps the tracer overhead per thread, which this JSON has not.
    for document in (from_json, from_native):
        for key in ("source", "overhead_ns", "overhead_share"):
            document.pop(key)
    assert from_native == from_json


def test_a_trace_without_metrics_says_where_to_learn_about_them(opsight_cli, tmp_path):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps([_span("a", 0, 10)]), encoding="utf-8")
    text = _report(opsight_cli, path, "--metrics")
    assert ("no counter tracks or span metrics in this trace (record with metrics: see "
            "docs/metrics.md)") in text.splitlines()
    tree = _report(opsight_cli, path, "--tree")
    assert tree.splitlines()[1].split() == ["span", "duration", "of", "parent", "start", "end"]


def test_metrics_is_one_view_among_others(opsight_cli, metrics_trace):
    completed = opsight_cli("report", metrics_trace, "--metrics", "--tree", "--format", "json")
    assert completed.returncode == 64
    assert "--metrics" in completed.stderr
    both = _report(opsight_cli, metrics_trace, "--metrics", "--tree")
    assert both.startswith("opsight tree:") and "\nopsight metrics:" in both
