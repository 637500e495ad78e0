"""Async functions and async generators: one span per call (per step), on the track of the
asyncio task running it, so concurrent tasks on one thread never nest into each other."""

from __future__ import annotations

import asyncio
import inspect

import pandas
import pytest

import opsight


def recorded(coroutine_function, *args):
    with opsight.profile() as prof:
        result = asyncio.run(coroutine_function(*args))
    return result, prof.dataframe()


@opsight.trace
async def leaf(tag, delay):
    await asyncio.sleep(delay)
    return tag


@opsight.trace
def sync_step(tag):
    return tag.upper()


@opsight.trace
async def middle(tag, delay):
    first = await leaf(tag, delay)
    await asyncio.sleep(delay / 2)
    second = await leaf(tag, delay)
    return sync_step(first + second)


@opsight.trace
async def handler(tag, delay):
    """Handles."""
    return await middle(tag, delay)


def check_nesting_within_tracks(frame):
    """Every span's parent is on the same track and encloses it in time."""
    spans = frame.set_index("span_id")
    children = frame[frame["parent_span_id"].notna()]
    for _, child in children.iterrows():
        parent = spans.loc[child["parent_span_id"]]
        assert parent["thread"] == child["thread"], (child["name"], parent["name"])
        assert parent["depth"] == child["depth"] - 1
        assert parent["start"] <= child["start"] and child["end"] <= parent["end"]


def test_coroutine_function_metadata():
    assert inspect.iscoroutinefunction(handler)
    assert handler.__doc__ == "Handles."
    assert handler.__wrapped__.__name__ == "handler"
    assert inspect.signature(handler) == inspect.signature(handler.__wrapped__)


def test_coroutine_result_and_duration():
    result, frame = recorded(leaf, "x", 0.02)
    assert result == "x"
    (row,) = frame.itertuples()
    assert row.name == "leaf"
    assert row.dur >= 15e6  # covers the await, not just the first step
    assert row.thread.startswith("asyncio Task-") and row.thread.endswith("(leaf)")
    assert not row.unfinished


def test_concurrent_tasks_on_one_thread_get_their_own_tracks():
    async def main():
        return await asyncio.gather(handler("a", 0.01), handler("b", 0.01))

    result, frame = recorded(main)
    assert result == ["AA", "BB"]
    assert frame["tid"].nunique() == 1  # one thread ...
    tracks = sorted(frame["thread"].unique())
    assert len(tracks) == 2  # ... two task tracks
    assert all(track.startswith("asyncio Task-") and track.endswith("(handler)")
               for track in tracks)
    for track in tracks:
        on_track = frame[frame["thread"] == track].sort_values("start")
        assert list(on_track["name"]) == ["handler", "middle", "leaf", "leaf", "sync_step"]
        assert list(on_track["depth"]) == [0, 1, 2, 2, 2]
    # the tasks overlap in time, yet neither nests into the other
    handlers = frame[frame["name"] == "handler"]
    assert handlers["start"].max() < handlers["end"].min()
    assert handlers["parent_span_id"].isna().all()
    check_nesting_within_tracks(frame)


def test_many_interleaved_tasks():
    async def worker(index):
        return await middle(str(index), 0.001 * (index % 3))

    async def main():
        return await asyncio.gather(*(worker(index) for index in range(12)))

    result, frame = recorded(main)
    assert result == [str(index) * 2 for index in range(12)]
    assert frame["thread"].nunique() == 12
    assert len(frame) == 12 * 4
    check_nesting_within_tracks(frame)
    roots = frame[frame["depth"] == 0]
    assert len(roots) == 12 and set(roots["name"]) == {"middle"}


def test_coroutine_exception_reraised_and_recorded():
    @opsight.trace
    async def failing():
        await asyncio.sleep(0)
        raise LookupError("no such model")

    async def main():
        with pytest.raises(LookupError, match="no such model"):
            await failing()
        return "survived"

    result, frame = recorded(main)
    assert result == "survived"
    assert len(frame) == 1
    assert frame.iloc[0]["exception.type"] == "LookupError"
    assert frame.iloc[0]["exception.message"] == "no such model"


def test_cancelled_task_ends_its_span():
    @opsight.trace
    async def forever(event):
        event.set()
        await asyncio.sleep(3600)

    async def main():
        event = asyncio.Event()
        task = asyncio.create_task(forever(event))
        await event.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return task.cancelled()

    cancelled, frame = recorded(main)
    assert cancelled
    (row,) = frame.itertuples(index=False)
    assert not row.unfinished
    assert frame.iloc[0]["exception.type"] == "asyncio.exceptions.CancelledError"


def test_coroutine_driven_by_hand_gets_a_lane():
    @opsight.trace
    async def plain():
        return 7

    def drive():
        coroutine = plain()
        with pytest.raises(StopIteration) as stop:
            coroutine.send(None)
        return stop.value.value

    with opsight.profile() as prof:
        result = drive()
    frame = prof.dataframe()
    assert result == 7
    assert list(frame["thread"]) == [f"coroutine {plain.__wrapped__.__qualname__}"]


def test_sync_spans_inside_a_task_join_its_track():
    @opsight.trace
    def compute():
        return 1

    @opsight.trace
    async def step():
        await asyncio.sleep(0)
        return compute()

    async def main():
        return await asyncio.gather(step(), step())

    result, frame = recorded(main)
    assert result == [1, 1]
    computes = frame[frame["name"] == compute.__qualname__]
    assert computes["depth"].tolist() == [1, 1]
    assert computes["thread"].nunique() == 2
    check_nesting_within_tracks(frame)


# ---- async generators -------------------------------------------------------------------

@opsight.trace
async def ticks(count):
    for index in range(count):
        await asyncio.sleep(0.001)
        yield index


def test_async_generator_function_metadata():
    assert inspect.isasyncgenfunction(ticks.__wrapped__)
    assert ticks.__name__ == "ticks"
    assert inspect.signature(ticks) == inspect.signature(ticks.__wrapped__)


def test_async_generator_one_span_per_step():
    async def main():
        return [value async for value in ticks(3)]

    result, frame = recorded(main)
    assert result == [0, 1, 2]
    # three steps that yield and the last one that ends the iteration
    assert list(frame["name"]) == ["ticks"] * 4
    assert frame["thread"].nunique() == 1 and frame.iloc[0]["thread"].endswith(".main)")
    # the end of the iteration (StopAsyncIteration) is not an error
    if "exception.type" in frame:
        assert frame["exception.type"].isna().all()


def test_async_generator_asend_athrow_aclose():
    @opsight.trace
    async def echo():
        received = None
        try:
            while True:
                try:
                    received = yield received
                except KeyError:
                    received = "recovered"
        finally:
            await asyncio.sleep(0)

    async def main():
        generator = echo()
        first = await generator.__anext__()
        second = await generator.asend("hello")
        third = await generator.athrow(KeyError("k"))
        await generator.aclose()
        return first, second, third

    result, frame = recorded(main)
    assert result == (None, "hello", "recovered")
    assert list(frame["name"]) == [echo.__qualname__] * 3


def test_async_generator_exception():
    @opsight.trace
    async def broken():
        yield 1
        raise ConnectionError("peer left")

    async def main():
        items = []
        with pytest.raises(ConnectionError, match="peer left"):
            async for item in broken():
                items.append(item)
        return items

    result, frame = recorded(main)
    assert result == [1]
    assert list(frame.sort_values("start")["exception.type"].fillna("")) == ["", "ConnectionError"]


def test_async_generators_in_concurrent_tasks():
    async def consume(count):
        return [value async for value in ticks(count)]

    async def main():
        return await asyncio.gather(consume(2), consume(3))

    result, frame = recorded(main)
    assert result == [[0, 1], [0, 1, 2]]
    per_track = frame.groupby("thread").size().sort_values().tolist()
    assert per_track == [3, 4]
    assert (frame["depth"] == 0).all()


def test_disabled_coroutines_record_nothing():
    opsight.disable()
    try:
        result, frame = recorded(handler, "q", 0.001)
    finally:
        opsight.enable()
    assert result == "QQ"
    assert frame.empty
    assert pandas.api.types.is_integer_dtype(frame["dur"]) or frame["dur"].empty
