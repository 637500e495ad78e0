"""Sampling by unit from Python (``opsight.profile(sample=..., sample_root=...)``,
``OPSIGHT_SAMPLE``): which units are kept, that a unit left out records nothing, that the
decision follows work to a thread pool and a child process, that a caller's traceparent
decides and a callee is told, that torch stands down inside a unit left out, and that the
reports say what was sampled."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys

import pytest

import opsight
from opsight import _native, propagation
from opsight._session.sampling import parse_sample_rate, parse_sample_root

from conftest import require


@opsight.trace
def handle_request(index: int) -> int:
    return step(index) + step(index)


@opsight.trace
def step(index: int) -> int:
    return index


def names(profile) -> list[str]:
    return list(profile.trace.slice_columns()["name"])


def test_rates_and_roots_are_parsed_with_clear_errors():
    assert parse_sample_rate(0.25) == 0.25
    assert parse_sample_rate("1/100") == 0.01
    assert parse_sample_rate("1 in 4") == 0.25
    assert parse_sample_rate("5%") == 0.05
    for bad in (0, 1.5, "0", "abc", "1/0", True, None, float("nan")):
        with pytest.raises(ValueError, match="sample"):
            parse_sample_rate(bad)
    assert parse_sample_root("requests") == "category:http"
    assert parse_sample_root(None) == ""
    with pytest.raises(ValueError, match="category name"):
        parse_sample_root("category:")
    with pytest.raises(ValueError, match="opsight.profile: sample"):
        opsight.profile(sample="often")


def test_one_in_four_root_spans_are_recorded_with_everything_under_them():
    with opsight.profile(sample="1/4") as profile:
        for index in range(40):
            handle_request(index)
    recorded = names(profile)
    assert recorded.count("handle_request") == 10
    assert recorded.count("step") == 20
    info = profile.trace.run_info()["extra"]
    assert info["sampling"] == "1 in 4 of root spans"
    assert (info["sampling_units"], info["sampling_units_recorded"]) == ("40", "10")


def test_a_named_root_leaves_what_is_around_it_recorded():
    with opsight.profile(sample=0.5, sample_root="handle_request") as profile:
        with opsight.span("serve forever"):
            for index in range(10):
                handle_request(index)
    recorded = names(profile)
    assert recorded.count("serve forever") == 1
    assert recorded.count("handle_request") == 5
    assert recorded.count("step") == 10


def test_the_reports_say_what_was_sampled():
    with opsight.profile(sample="1/2") as profile:
        for index in range(8):
            handle_request(index)
    text = profile.report("summary")
    assert "sampled 1 in 2 of root spans: 4 of 8 units recorded" in text
    assert "not totals" in text
    tree = json.loads(profile.report("tree", format="json"))
    assert tree["sampling"] == {"policy": "1 in 2 of root spans", "units": 8,
                                "units_recorded": 4}


def test_a_job_submitted_to_a_thread_pool_follows_its_unit():
    def job(index: int) -> int:
        return step(index)

    @opsight.trace("request")
    def request(pool, index: int) -> int:
        return pool.submit(job, index).result()

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        pool.submit(lambda: None).result()  # the worker threads exist before the session
        with opsight.profile(sample="1/3") as profile:
            for index in range(9):
                request(pool, index)
    recorded = names(profile)
    assert recorded.count("request") == 3
    # Only the jobs of the 3 recorded requests: each worker's job span would otherwise be a
    # root of its own, sampled 1 in 3 on its own counter.
    assert sum(1 for name in recorded if name.startswith("job ")) == 3
    assert recorded.count("step") == 3


def test_inject_tells_the_callee_that_the_unit_was_sampled_out():
    headers = []
    with opsight.profile(sample="1/2"):
        for _ in range(2):
            with opsight.span("request"):
                headers.append(propagation.inject({})["traceparent"])
    assert headers[0].endswith("-01")  # recorded: sampled
    assert headers[1].endswith("-00")  # sampled out: the flag off


def test_a_callers_decision_wins_over_the_rate():
    with opsight.profile(sample="1/1000") as profile:
        handle_request(0)  # the rate's first unit: kept
        _native.decide_next_sampling_unit(True)
        handle_request(1)  # the rate would leave it out; the caller said recorded
        handle_request(2)  # out
    assert names(profile).count("handle_request") == 2
    assert profile.trace.run_info()["extra"]["sampling_units"] == "3"


def test_a_child_process_started_in_a_unit_left_out_is_left_out_too(tmp_path):
    child = ("import opsight\n"
             "with opsight.span('child work'):\n"
             "    pass\n")
    outputs = []
    with opsight.profile(sample="1/2"):
        for index in range(2):
            output = str(tmp_path / f"child{index}.opsight")
            outputs.append(output)
            with opsight.span("request"):
                environment = dict(os.environ, OPSIGHT_OUTPUT=output, OPSIGHT_SAMPLE="1/2")
                subprocess.run([sys.executable, "-c", child], env=environment, check=True)
    kept = [list(opsight.load(output).trace.slice_columns()["name"]) for output in outputs]
    assert "child work" in kept[0]  # started in the recorded unit
    assert "child work" not in kept[1]  # started in the unit left out


def test_torch_builds_no_record_function_inside_a_unit_left_out():
    torch = require("torch")
    import opsight.torch  # noqa: F401

    x = torch.ones(4)
    # torch.profiler, running around it all, sees an operator only where torch built a
    # RecordFunction: inside the recorded unit, not inside the one left out.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as seen:
        with opsight.profile(sample="1/2") as profile:
            for _ in range(2):
                with opsight.span("request"):
                    torch.neg(x)
        torch.neg(x)  # after the session: RecordFunction is back
    recorded = names(profile)
    assert recorded.count("request") == 1
    assert recorded.count("aten::neg") == 1
    profiled = sum(event.count for event in seen.key_averages() if event.key == "aten::neg")
    assert profiled == 2  # the recorded unit's and the one after the session


def test_operators_that_are_roots_are_sampled_with_the_operators_they_call():
    torch = require("torch")
    import opsight.torch

    x = torch.ones(4, 4)
    weight = torch.ones(4, 4)
    # Operators only, no span around them: each outermost operator is a unit. torch keeps
    # building RecordFunctions inside the units left out (switching it off and on per
    # operator would cost more than the operators nested in one), so torch.profiler sees
    # every aten::linear and the aten::t in each; opsight records 1 in 4 of them, with what
    # each calls.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as seen:
        with opsight.torch.tracing(operators=True, modules=False):
            with opsight.profile(sample="1/4") as profile:
                for _ in range(8):
                    torch.nn.functional.linear(x, weight)
    recorded = names(profile)
    assert recorded.count("aten::linear") == 2
    assert recorded.count("aten::t") == 2  # linear's own call, kept with its unit
    info = profile.trace.run_info()["extra"]
    assert (info["sampling_units"], info["sampling_units_recorded"]) == ("8", "2")
    profiled = {event.key: event.count for event in seen.key_averages()}
    assert (profiled.get("aten::linear"), profiled.get("aten::t")) == (8, 8)


def test_opsight_run_samples_the_program_it_runs(tmp_path):
    from conftest import opsight_run, spans_of, write

    write(tmp_path, "app.py", """
        def step(n):
            return n

        def handle(n):
            return step(n) + step(n)

        def main():
            return sum(handle(n) for n in range(20))

        if __name__ == "__main__":
            print(main())
        """)
    write(tmp_path, "targets.yaml", """
        targets:
          - {module: __main__, function: main}
          - {module: __main__, function: handle}
          - {module: __main__, function: step}
        """)
    completed = opsight_run(["-c", "targets.yaml", "-o", "out.opsight", "--sample", "1/5",
                             "--sample-root", "handle", "--no-store", "--", "python", "app.py"],
                            tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "380\n"
    assert "sampled 1 in 5 of 'handle' spans: 4 of 20 units recorded" in completed.stderr
    names = list(spans_of(tmp_path / "out.opsight")["name"])
    assert (names.count("main"), names.count("handle"), names.count("step")) == (1, 4, 8)

    refused = opsight_run(["--sample", "often", "--", "python", "app.py"], tmp_path)
    assert refused.returncode == 64
    assert "opsight run: --sample: 'often' is not a rate" in refused.stderr


def test_the_operators_scope_keeps_every_span_and_the_operators_of_a_sample():
    torch = require("torch")
    import opsight.torch  # noqa: F401

    x = torch.ones(4)
    layer = torch.nn.Linear(4, 4)
    # Every request and its module span are recorded; torch builds RecordFunctions (and
    # opsight records operators) in 1 unit of 2 only.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as seen:
        with opsight.profile(sample="1/2", sample_scope="operators") as profile:
            for _ in range(4):
                with opsight.span("request"):
                    torch.neg(x)
                    layer(x)
    recorded = names(profile)
    assert recorded.count("request") == 4
    assert recorded.count("aten::neg") == 2
    assert sum(1 for name in recorded if name.startswith("Linear")) == 4, recorded
    profiled = sum(event.count for event in seen.key_averages() if event.key == "aten::neg")
    assert profiled == 2
    info = profile.trace.run_info()["extra"]
    assert info["sampling"] == "operators in 1 in 2 of root spans"
    assert "operator counts are of these" in profile.report("summary")


def test_a_bad_sample_scope_is_refused():
    with pytest.raises(ValueError, match="sample_scope: expected 'all' or 'operators'"):
        opsight.profile(sample="1/2", sample_scope="ops")
