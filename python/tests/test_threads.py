"""Threads: spans nest per thread, never across threads; a thread's track has a name."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import opsight


@opsight.trace
def leaf(barrier, index):
    barrier.wait()  # every thread is inside its own leaf at the same time
    return index


@opsight.trace
def branch(barrier, index):
    return leaf(barrier, index) + leaf(barrier, index)


def check_nesting(frame):
    spans = frame.set_index("span_id")
    children = frame[frame["parent_span_id"].notna()]
    parents = spans.loc[children["parent_span_id"]]
    assert (parents["tid"].to_numpy() == children["tid"].to_numpy()).all()
    assert (parents["thread"].to_numpy() == children["thread"].to_numpy()).all()
    assert (parents["depth"].to_numpy() == children["depth"].to_numpy() - 1).all()
    assert (parents["start"].to_numpy() <= children["start"].to_numpy()).all()
    assert (parents["end"].to_numpy() >= children["end"].to_numpy()).all()


def test_interleaved_threads_nest_separately():
    barrier = threading.Barrier(4)
    results = {}

    def worker(index):
        results[index] = branch(barrier, index)

    with opsight.profile() as prof:
        threads = [threading.Thread(target=worker, args=(index,)) for index in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    frame = prof.dataframe()
    assert results == {index: 2 * index for index in range(4)}
    assert len(frame) == 12
    assert frame["tid"].nunique() == 4
    for _, spans_of_thread in frame.groupby("tid"):
        assert sorted(spans_of_thread["depth"]) == [0, 1, 1]
        assert spans_of_thread["thread"].nunique() == 1
    check_nesting(frame)
    assert frame["thread"].map(bool).all()  # every track has a name
    assert frame["thread"].nunique() == 4


def test_spans_of_other_threads_are_not_children_of_the_main_threads():
    barrier = threading.Barrier(1)
    with opsight.profile() as prof:
        with opsight.span("main work"):
            thread = threading.Thread(target=branch, args=(barrier, 1))
            thread.start()
            thread.join()
    frame = prof.dataframe()
    roots = frame[frame["parent_span_id"].isna()]
    assert sorted(roots["name"]) == ["branch", "main work"]
    assert roots["tid"].nunique() == 2
    check_nesting(frame)


def test_thread_pool_executor():
    barrier = threading.Barrier(3)
    with opsight.profile() as prof:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda index: branch(barrier, index), range(6)))
    frame = prof.dataframe()
    assert results == [2 * index for index in range(6)]
    assert (frame["name"] == "branch").sum() == 6 and (frame["name"] == "leaf").sum() == 12
    assert frame["tid"].nunique() == 3
    check_nesting(frame)


def test_event_loops_in_several_threads():
    @opsight.trace("step")
    async def step(index):
        await asyncio.sleep(0.001)
        return index

    @opsight.trace("job")
    async def job(index):
        return await step(index) + await step(index)

    def run_loop(index, results):
        async def main():
            return await asyncio.gather(job(index), job(index + 10))
        results[index] = asyncio.run(main())

    results = {}
    with opsight.profile() as prof:
        threads = [threading.Thread(target=run_loop, args=(index, results)) for index in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    frame = prof.dataframe()
    assert results == {index: [2 * index, 2 * index + 20] for index in range(3)}
    assert frame["tid"].nunique() == 3
    # two task tracks per thread, each with one job and its two steps
    assert frame["thread"].nunique() == 6
    for _, on_track in frame.groupby("thread"):
        assert sorted(on_track["name"]) == ["job", "step", "step"]
        assert on_track["tid"].nunique() == 1
    check_nesting(frame)


def test_switching_off_while_threads_run():
    stop = threading.Event()
    calls = []

    @opsight.trace
    def tick():
        calls.append(1)

    def worker():
        while not stop.is_set():
            tick()

    with opsight.profile() as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        for _ in range(20):
            opsight.disable()
            opsight.enable()
        stop.set()
        thread.join()
    frame = prof.dataframe()
    assert 0 < len(frame) <= len(calls)
    assert not frame["unfinished"].any()
    assert (frame["depth"] == 0).all()


def test_threads_carry_the_names_python_gave_them():
    @opsight.trace
    def job():
        return threading.current_thread().name

    started_before = threading.Event()
    finish_before = threading.Event()

    def waits_for_the_session():
        started_before.set()
        finish_before.wait()
        job()

    earlier = threading.Thread(target=waits_for_the_session, name="started-before-the-session")
    earlier.start()
    started_before.wait()
    with opsight.profile() as prof:
        job()  # the main thread
        named = threading.Thread(target=job, name="prefetcher")
        named.start()
        named.join()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool") as pool:
            pool_thread_name = pool.submit(lambda: (job(), threading.current_thread().name)[1]).result()
        finish_before.set()
        earlier.join()

        def self_named():
            opsight._native.set_thread_name("chosen by the thread")  # as a C++ library would
            job()

        chooser = threading.Thread(target=self_named, name="python-name")
        chooser.start()
        chooser.join()
    jobs = prof.dataframe()
    jobs = jobs[jobs["name"].str.endswith("job")]
    assert sorted(jobs["thread"]) == sorted([
        threading.main_thread().name, "prefetcher", pool_thread_name,
        "started-before-the-session", "chosen by the thread"])
    # After the session, Thread._bootstrap_inner is the original again.
    assert not hasattr(threading.Thread._bootstrap_inner, "__opsight_thread_names__")
