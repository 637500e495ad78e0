"""Flows across hand-offs: asyncio tasks, thread-pool jobs and child processes linked to
the span that started them (opsight.integrations.handoffs), read back from the trace with
``opsight report --tree --format json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import opsight
from conftest import require
from opsight._core_command import core_command_path

PROGRAM = textwrap.dedent("""
    import asyncio, concurrent.futures, subprocess, sys
    import opsight

    @opsight.trace
    async def handler(i):
        await asyncio.sleep(0)

    @opsight.trace
    async def serve():
        await asyncio.gather(*(asyncio.create_task(handler(i)) for i in range(2)))

    @opsight.trace
    def work(x):
        return x * 2

    @opsight.trace
    def submit_jobs():
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            return list(pool.map(work, range(3)))

    @opsight.trace
    def spawn():
        child = "import opsight\\n@opsight.trace\\ndef child_main(): pass\\nchild_main()"
        subprocess.run([sys.executable, "-c", child], check=True)

    asyncio.run(serve())
    submit_jobs()
    spawn()
""")


def _tree(path: Path) -> dict:
    result = subprocess.run([core_command_path(), "report", str(path), "--tree", "--format", "json"],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def _links(tree: dict) -> list[tuple[str, str]]:
    """(receiving span, sending span) of every link in a tree report, sorted."""
    return sorted((node["name"], node["from"]["name"]) for node in _walk(tree["roots"])
                  if "from" in node)


def _walk(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from _walk(node["children"])


def test_tasks_jobs_and_children_link_to_the_span_that_started_them(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(PROGRAM)
    output = tmp_path / "run.opsight"
    environment = dict(os.environ)
    environment.pop("OPSIGHT_OUTPUT", None)
    subprocess.run([sys.executable, "-m", "opsight", "run", "--no-store", "-o", str(output),
                    "--report", "none", "--", sys.executable, str(script)],
                   check=True, env=environment, capture_output=True, text=True)
    tree = _tree(output)
    sources = {}
    for node in _walk(tree["roots"]):
        if "from" in node:
            sources.setdefault(node["name"], []).append(node["from"])
    # Each asyncio task's first span comes from the span that created the task.
    assert [source["name"] for source in sources["handler"]] == ["serve", "serve"]
    assert all("Task-" in source["track"] for source in sources["handler"])
    # Each pool job runs in a span of its own on a worker thread, from the submitter.
    assert [source["name"] for source in sources["job work"]] == ["submit_jobs"] * 3
    # The child process's first span comes from the parent's subprocess call, across pids.
    [child_source] = sources["child_main"]
    assert child_source["name"].startswith("subprocess python")
    assert child_source["pid"] != 0
    assert tree["flows"] >= 6
    handed = {node["name"]: node.get("handed_off", 0) for node in _walk(tree["roots"])}
    assert handed["serve"] == 2 and handed["submit_jobs"] == 3

    # The same links in the Chrome JSON and Perfetto outputs of the run.
    links = _links(tree)
    chrome = tmp_path / "run.json"
    subprocess.run([core_command_path(), "convert", str(output), str(chrome)], check=True,
                   capture_output=True)
    assert _links(_tree(chrome)) == links
    require("perfetto")
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2

    pftrace = tmp_path / "run.pftrace"
    subprocess.run([core_command_path(), "convert", str(output), str(pftrace)], check=True,
                   capture_output=True)
    decoded = perfetto_trace_pb2.Trace()
    decoded.ParseFromString(pftrace.read_bytes())
    leaving = [flow for packet in decoded.packet if packet.HasField("track_event")
               for flow in packet.track_event.flow_ids]
    arriving = [flow for packet in decoded.packet if packet.HasField("track_event")
                for flow in packet.track_event.terminating_flow_ids]
    assert len(leaving) == tree["flows"] and sorted(leaving) == sorted(arriving)


def test_multiprocessing_children_by_fork_and_spawn_link_to_their_start(tmp_path: Path) -> None:
    script = tmp_path / "mp.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing as mp, opsight

        @opsight.trace
        def child_work(x):
            return x

        @opsight.trace
        def start_children(method):
            process = mp.get_context(method).Process(target=child_work, args=(1,))
            process.start()
            process.join()

        if __name__ == "__main__":
            start_children("fork")
            start_children("spawn")
    """))
    output = tmp_path / "mp.opsight"
    environment = dict(os.environ)
    environment.pop("OPSIGHT_OUTPUT", None)
    subprocess.run([sys.executable, "-m", "opsight", "run", "--no-store", "-o", str(output),
                    "--report", "none", "--", sys.executable, str(script)],
                   check=True, env=environment, capture_output=True, text=True, cwd=tmp_path)
    tree = _tree(output)
    sources = [node["from"]["name"] for node in _walk(tree["roots"])
               if node["name"] == "child_work" and "from" in node]
    assert sorted(sources) == ["multiprocessing ForkProcess-1", "multiprocessing SpawnProcess-2"]


def test_the_api_links_a_hand_off_and_records_async_spans(tmp_path: Path) -> None:
    import threading

    output = tmp_path / "api.opsight"
    with opsight.profile(str(output), store=False):
        with opsight.span("enqueue"):
            flow = opsight.flow_out()
            assert opsight.begin_async("request 1", 1)

        def worker() -> None:
            with opsight.span("dequeue"):
                opsight.flow_in(flow)
            opsight.end_async(1)

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    tree = _tree(output)
    nodes = {node["name"]: node for node in _walk(tree["roots"])}
    assert nodes["dequeue"]["from"]["name"] == "enqueue"
    frame = opsight.load(str(output)).dataframe().set_index("name")
    assert frame.loc["dequeue", "linked_from_span_id"] == frame.loc["enqueue", "span_id"]
    assert frame["linked_from_span_id"].isna().sum() == len(frame) - 1
    assert nodes["enqueue"]["handed_off"] == 1
    assert nodes["request 1"]["async"] is True
    assert nodes["request 1"]["track"].startswith("request 1")


def test_hooks_are_removed_when_the_session_stops(tmp_path: Path) -> None:
    import concurrent.futures

    original = concurrent.futures.ThreadPoolExecutor.__dict__["submit"]
    with opsight.profile(str(tmp_path / "x.opsight"), store=False):
        assert hasattr(concurrent.futures.ThreadPoolExecutor.__dict__["submit"],
                       "__opsight_handoff__")
    assert concurrent.futures.ThreadPoolExecutor.__dict__["submit"] is original


def test_hooks_leave_what_the_program_sees_unchanged(tmp_path: Path) -> None:
    import concurrent.futures
    import functools

    class Callable:
        def __call__(self, value):
            return value + 1

        def __repr__(self):
            raise RuntimeError("repr must not be called")

    os.putenv("OPSIGHT_TEST_C_ONLY", "from putenv")  # in the C environment, not os.environ
    try:
        output = tmp_path / "same.opsight"
        with opsight.profile(str(output), store=False):
            with opsight.span("submit"):
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    assert pool.submit(functools.partial(pow, 2), 3).result() == 8
                    assert pool.submit(Callable(), 1).result() == 2
                child = subprocess.run(
                    [sys.executable, "-c",
                     "import os; print(os.environ.get('OPSIGHT_TEST_C_ONLY'))"],
                    capture_output=True, text=True, check=True)
    finally:
        os.unsetenv("OPSIGHT_TEST_C_ONLY")
    # A child without env= gets the environment it would have had, C changes included.
    assert child.stdout.strip() == "from putenv"
    names = {node["name"] for node in _walk(_tree(output)["roots"])}
    assert {"job pow", "job test_hooks_leave_what_the_program_sees_unchanged.<locals>.Callable"} <= names


def test_an_eager_task_takes_its_flow_while_create_task_runs_it(tmp_path: Path) -> None:
    import asyncio

    if not hasattr(asyncio, "eager_task_factory"):
        import pytest

        pytest.skip("eager tasks (asyncio.eager_task_factory) need Python 3.12, as docs/python.md "
                    f"says (this is {sys.version.split()[0]})")

    @opsight.trace
    async def handler() -> None:
        await asyncio.sleep(0)

    @opsight.trace
    async def serve() -> None:
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        await asyncio.create_task(handler())

    output = tmp_path / "eager.opsight"
    with opsight.profile(str(output), store=False):
        asyncio.run(serve())
    nodes = {node["name"]: node for node in _walk(_tree(output)["roots"])}
    assert nodes["handler"]["from"]["name"] == "serve"
