"""``opsight.profile``: sessions, labelled sections, pause/resume, reports, files."""

from __future__ import annotations

import io
import json

import pytest

import opsight
from opsight import _native
from opsight._session import state as _session_state


@opsight.trace
def work(n=1):
    return sum(range(n))


def test_records_only_inside_the_block():
    work()
    with opsight.profile() as prof:
        assert _native.recording()
        assert _session_state.session is not None
        work()
    assert not _native.recording()
    work()
    frame = prof.dataframe()
    assert list(frame["name"]) == ["work"]


def test_record_sections_with_attributes():
    with opsight.profile() as prof:
        with prof.record("warm up", batch=4):
            work()
            work()
        work()
    frame = prof.dataframe().sort_values("start")
    assert list(frame["name"]) == ["warm up", "work", "work", "work"]
    assert list(frame["category"]) == ["record", "python", "python", "python"]
    assert list(frame["depth"]) == [0, 1, 1, 0]
    section = frame.iloc[0]
    assert section["batch"] == 4
    assert (frame.iloc[1:3]["parent_span_id"] == section["span_id"]).all()


def test_pause_and_resume():
    with opsight.profile() as prof:
        work(1)
        prof.pause()
        for _ in range(5):
            work(2)
        prof.resume()
        work(3)
    assert len(prof.dataframe()) == 2


def test_dataframe_columns():
    with opsight.profile() as prof:
        with opsight.span("outer", size=3):
            work()
    frame = prof.dataframe()
    expected = ["trace_id", "span_id", "parent_span_id", "linked_from_span_id", "name",
                "category", "thread", "pid", "tid", "start", "end", "dur", "depth", "unfinished",
                "size"]
    assert list(frame.columns) == expected
    assert frame["trace_id"].nunique() == 1 and len(frame["trace_id"].iloc[0]) == 32
    assert frame["span_id"].str.fullmatch("[0-9a-f]{16}").all()
    assert frame["span_id"].is_unique
    assert (frame["end"] - frame["start"] == frame["dur"]).all()
    outer = frame[frame["name"] == "outer"].iloc[0]
    inner = frame[frame["name"] == "work"].iloc[0]
    assert inner["parent_span_id"] == outer["span_id"]
    assert outer["size"] == 3
    import os
    assert (frame["pid"] == os.getpid()).all()


def test_summary_as_data():
    with opsight.profile() as prof:
        for n in (10, 20, 30):
            work(n)
    (row,) = prof.summary()
    assert row["name"] == "work" and row["count"] == 3
    durations = sorted(prof.dataframe()["dur"])
    assert row["total_ns"] == sum(durations)
    assert row["min_ns"] == durations[0] and row["max_ns"] == durations[-1]
    assert row["p50_ns"] == durations[1]
    for key in ("self_ns", "mean_ns", "p90_ns", "p95_ns", "p97_ns", "p99_ns", "p999_ns",
                "stddev_ns"):
        assert key in row


def test_printed_reports():
    with opsight.profile() as prof:
        with prof.record("load"):
            work()
    tree, summary, table = io.StringIO(), io.StringIO(), io.StringIO()
    prof.print_tree(file=tree)
    prof.print_summary(file=summary)
    prof.print_table(file=table)
    assert "load" in tree.getvalue() and "└─ work" in tree.getvalue()
    for text in (tree.getvalue(), summary.getvalue(), table.getvalue()):
        assert "tracer overhead" in text
    assert "p99" in summary.getvalue() and "p99.9" in summary.getvalue()
    assert json.loads(prof.report("summary", "json"))[0]["name"] in ("load", "work")
    with pytest.raises(ValueError, match="unknown report"):
        prof.report("nonsense")


def test_output_file_and_save_and_export(tmp_path):
    output = tmp_path / "run.opsight"
    with opsight.profile(output) as prof:
        work()
        work()
    assert output.exists()
    assert len(prof.dataframe()) == 2
    assert list(opsight.spans_dataframe(opsight.load(output).trace)["name"]) == ["work"] * 2

    prof.save(tmp_path / "copy.opsight")
    prof.export_chrome_trace(tmp_path / "chrome.json")
    events = json.loads((tmp_path / "chrome.json").read_text())["traceEvents"]
    assert sum(event.get("name") == "work" for event in events) == 2
    again = opsight.spans_dataframe(opsight.load(tmp_path / "copy.opsight").trace)
    assert list(again["dur"]) == list(prof.dataframe()["dur"])
    with pytest.raises(ValueError, match="must end in .json"):
        prof.export_chrome_trace(tmp_path / "chrome.opsight")


def test_chrome_json_output(tmp_path):
    output = tmp_path / "trace.json"
    with opsight.profile(str(output)):
        work()
        opsight.instant("checkpoint")
        opsight.counter("queue depth", 3)
    events = json.loads(output.read_text())["traceEvents"]
    by_name = {event["name"]: event for event in events if "name" in event}
    assert by_name["work"]["ph"] in ("X", "B")
    assert by_name["checkpoint"]["ph"] == "i"
    assert by_name["queue depth"]["ph"] == "C" and by_name["queue depth"]["args"]["value"] == 3


def test_results_need_a_stopped_profile():
    prof = opsight.profile()
    with pytest.raises(RuntimeError, match="once the profile has stopped"):
        prof.summary()
    with prof:
        with pytest.raises(RuntimeError, match="already started"):
            prof.start()
        with pytest.raises(RuntimeError, match="once the profile has stopped"):
            prof.dataframe()


def test_unwritable_output_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="cannot open"):
        with opsight.profile(tmp_path / "missing" / "run.opsight"):
            pass
    assert _session_state.session is None
    assert not _native.recording()


def test_profile_inside_a_running_session_records_a_section():
    with opsight.profile() as outer:
        with opsight.profile(label="inner block") as inner:
            work()
        with pytest.raises(RuntimeError, match="already running"):
            inner.summary()
    frame = outer.dataframe().sort_values("start")
    assert list(frame["name"]) == ["inner block", "work"]
    assert list(frame["category"]) == ["record", "python"]


def test_sessions_one_after_another():
    for count in (1, 3):
        with opsight.profile() as prof:
            for _ in range(count):
                work()
        assert len(prof.dataframe()) == count


def test_exception_in_block_stops_the_session():
    with pytest.raises(ZeroDivisionError):
        with opsight.profile() as prof:
            work()
            1 / 0
    assert not _native.recording()
    assert list(prof.dataframe()["name"]) == ["work"]


def test_a_trace_is_written_whole_or_not_at_all(tmp_path):
    """Files are written to a temporary file beside the target, then renamed: a write that
    fails leaves what was there and no temporary file behind."""
    with opsight.profile() as prof:
        with opsight.span("work"):
            pass
    target = tmp_path / "out.opsight"
    prof.save(target)
    first = target.read_bytes()
    prof.save(target)  # rewritten in place: the same bytes, nothing left beside it
    assert target.read_bytes() == first
    blocked = tmp_path / "blocked.opsight"  # a folder: the rename over it fails
    blocked.mkdir()
    (blocked / "keep").write_text("kept")
    with pytest.raises(RuntimeError, match="blocked.opsight: cannot write"):
        prof.save(blocked)
    assert (blocked / "keep").read_text() == "kept"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["blocked.opsight", "out.opsight"]
