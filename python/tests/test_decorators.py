"""``@opsight.trace`` and ``opsight.span`` on every kind of callable: spans recorded, and the
callable's behaviour unchanged (results, exceptions, metadata, binding, pickling)."""

from __future__ import annotations

import functools
import inspect
import math
import pickle
import sys
import traceback

import pandas
import pytest

import opsight
from opsight import _native


def recorded(action):
    """Runs ``action()`` inside a profile; returns (its result, the spans' DataFrame)."""
    with opsight.profile() as prof:
        result = action()
    return result, prof.dataframe()


def names(frame):
    return list(frame.sort_values("start")["name"])


# ---- module-level callables (pickling needs them here) ----------------------------------

@opsight.trace
def add(a, b=2, *rest, scale: int = 1, **options) -> int:
    """Adds."""
    return (a + b + sum(rest)) * scale + len(options)


@opsight.trace("custom name", category="preprocess")
def named():
    return "named"


class AppError(Exception):
    pass


@opsight.trace
def fail(message):
    raise AppError(message)


@opsight.trace
def fail_builtin():
    return {}["missing"]


@opsight.trace
def recurse(n):
    return 0 if n == 0 else 1 + recurse(n - 1)


class Shape:
    created = []

    def __init__(self, side):
        self.side = side

    @opsight.trace
    def area(self):
        return self.side * self.side

    @opsight.trace
    @classmethod
    def make_above(cls, side):
        return cls(side)

    @classmethod
    @opsight.trace
    def make_below(cls, side):
        return cls(side)

    @opsight.trace
    @staticmethod
    def double_above(x):
        return 2 * x

    @staticmethod
    @opsight.trace
    def double_below(x):
        return 2 * x

    @opsight.trace
    def __call__(self, factor):
        return self.side * factor


class Square(Shape):
    pass


# ---- plain functions --------------------------------------------------------------------

def test_function_result_and_span():
    result, frame = recorded(lambda: add(1, 2, 3, scale=2, extra=True))
    assert result == 13
    assert names(frame) == ["add"]
    row = frame.iloc[0]
    assert row["category"] == "python"
    assert row["dur"] > 0 and row["end"] == row["start"] + row["dur"]
    assert row["depth"] == 0 and row["parent_span_id"] is None


def test_named_span_and_category():
    result, frame = recorded(named)
    assert result == "named"
    assert list(frame["name"]) == ["custom name"]
    assert list(frame["category"]) == ["preprocess"]


def test_one_span_per_call_and_nesting():
    @opsight.trace
    def inner(x):
        return x + 1

    @opsight.trace
    def outer():
        return [inner(i) for i in range(3)]

    result, frame = recorded(outer)
    assert result == [1, 2, 3]
    assert names(frame) == ["test_one_span_per_call_and_nesting.<locals>.outer"] + [
        "test_one_span_per_call_and_nesting.<locals>.inner"] * 3
    parent = frame[frame["depth"] == 0].iloc[0]
    children = frame[frame["depth"] == 1]
    assert len(children) == 3
    assert (children["parent_span_id"] == parent["span_id"]).all()
    assert (children["start"] >= parent["start"]).all()
    assert (children["end"] <= parent["end"]).all()


def test_recursion_depths():
    result, frame = recorded(lambda: recurse(4))
    assert result == 4
    assert sorted(frame["depth"]) == [0, 1, 2, 3, 4]
    by_depth = frame.set_index("depth")
    for depth in range(1, 5):
        assert by_depth.loc[depth, "parent_span_id"] == by_depth.loc[depth - 1, "span_id"]


def test_metadata_as_functools_wraps_leaves_it():
    original = add.__wrapped__
    assert add.__name__ == original.__name__ == "add"
    assert add.__qualname__ == original.__qualname__
    assert add.__doc__ == "Adds."
    assert add.__module__ == __name__
    assert add.__annotations__ == original.__annotations__
    assert inspect.signature(add) == inspect.signature(original)
    # (annotations are strings here: this module uses ``from __future__ import annotations``)
    assert str(inspect.signature(add)) == "(a, b=2, *rest, scale: 'int' = 1, **options) -> 'int'"
    assert inspect.unwrap(add) is original
    # update_wrapper also copies the function's own attributes
    def tagged():
        pass
    tagged.marker = 42
    assert opsight.trace(tagged).marker == 42


def test_tracing_twice_returns_the_same_wrapper():
    again = opsight.trace(add)
    assert again is add


def test_not_callable_is_refused():
    with pytest.raises(TypeError, match="not callable"):
        opsight.trace("a name")(42)
    with pytest.raises(TypeError, match="a callable or a span name"):
        opsight.trace(42)


def test_untraced_outside_a_session_and_when_disabled():
    assert not _native.recording()
    assert add(1) == 3  # no session: calls straight through
    opsight.disable()
    try:
        assert not opsight.enabled()
        result, frame = recorded(lambda: add(1) + recurse(2))
    finally:
        opsight.enable()
    assert result == 5
    assert frame.empty
    assert opsight.enabled()
    _, frame = recorded(lambda: add(1))
    assert names(frame) == ["add"]


def test_pickled_by_reference():
    data = pickle.dumps(add)
    assert pickle.loads(data) is add
    assert pickle.loads(pickle.dumps(Shape.double_below)) is Shape.double_below
    assert pickle.loads(pickle.dumps(Shape.area)) is Shape.area
    # a wrapper its name does not lead to pickles as the callable it wraps
    assert pickle.loads(pickle.dumps(opsight.trace(math.sqrt))) is math.sqrt

    def local():
        pass

    with pytest.raises((pickle.PicklingError, AttributeError), match="local"):
        pickle.dumps(opsight.trace(local))  # as pickle.dumps(local) does


# ---- exceptions -------------------------------------------------------------------------

def test_exception_reraised_unchanged_and_recorded():
    captured = []

    def call():
        try:
            fail("disk on fire")
        except AppError as error:
            captured.append(error)
            captured.append(traceback.extract_tb(error.__traceback__))

    recorded_error = None
    _, frame = recorded(call)
    recorded_error, frames = captured
    assert type(recorded_error) is AppError and recorded_error.args == ("disk on fire",)
    # the traceback still reaches the raise inside the original function
    assert frames[-1].name == "fail" and "raise AppError" in frames[-1].line
    row = frame.iloc[0]
    assert row["name"] == "fail"
    assert row["exception.type"] == f"{__name__}.AppError"
    assert row["exception.message"] == "disk on fire"


def test_builtin_exception_type_has_no_module_prefix():
    def call():
        with pytest.raises(KeyError):
            fail_builtin()

    _, frame = recorded(call)
    assert frame.iloc[0]["exception.type"] == "KeyError"
    assert frame.iloc[0]["exception.message"] == "'missing'"


def test_same_exception_object_propagates():
    sentinel = ValueError("the one")

    @opsight.trace
    def raise_it():
        raise sentinel

    def call():
        with pytest.raises(ValueError) as caught:
            raise_it()
        return caught.value

    caught, frame = recorded(call)
    assert caught is sentinel
    assert frame.iloc[0]["exception.type"] == "ValueError"


def test_exception_only_on_the_span_it_left():
    @opsight.trace
    def inner():
        raise RuntimeError("inner")

    @opsight.trace
    def outer():
        try:
            inner()
        except RuntimeError:
            return "handled"

    result, frame = recorded(outer)
    assert result == "handled"
    by_name = frame.set_index("name")
    assert by_name.loc[inner.__qualname__, "exception.type"] == "RuntimeError"
    assert pandas.isna(by_name.loc[outer.__qualname__, "exception.type"])


def test_system_exit_passes_through():
    @opsight.trace
    def leave():
        sys.exit(3)

    def call():
        with pytest.raises(SystemExit) as caught:
            leave()
        return caught.value.code

    code, frame = recorded(call)
    assert code == 3
    assert frame.iloc[0]["exception.type"] == "SystemExit"


# ---- methods ----------------------------------------------------------------------------

def test_instance_method_binds():
    shape = Shape(3)
    bound = shape.area
    assert bound.__self__ is shape
    result, frame = recorded(lambda: (shape.area(), Shape.area(shape), bound()))
    assert result == (9, 9, 9)
    assert names(frame) == ["Shape.area"] * 3


@pytest.mark.parametrize("factory", ["make_above", "make_below"])
def test_classmethod_in_either_order(factory):
    def call():
        return getattr(Shape, factory)(2), getattr(Square, factory)(3), getattr(Shape(1), factory)(4)

    (a, b, c), frame = recorded(call)
    assert type(a) is Shape and a.side == 2
    assert type(b) is Square and b.side == 3  # cls is the subclass it was called on
    assert type(c) is Shape and c.side == 4
    assert names(frame) == [f"Shape.{factory}"] * 3
    assert isinstance(Shape.__dict__[factory], classmethod)


@pytest.mark.parametrize("method", ["double_above", "double_below"])
def test_staticmethod_in_either_order(method):
    result, frame = recorded(lambda: (getattr(Shape, method)(4), getattr(Shape(1), method)(5)))
    assert result == (8, 10)
    assert names(frame) == [f"Shape.{method}"] * 2
    assert isinstance(Shape.__dict__[method], staticmethod)


def test_dunder_call_and_inherited_method():
    result, frame = recorded(lambda: (Square(2)(5), Square(4).area()))
    assert result == (10, 16)
    assert names(frame) == ["Shape.__call__", "Shape.area"]


def test_callable_objects_and_partials():
    class Scaler:
        def __call__(self, x):
            return 10 * x

    traced_scaler = opsight.trace("scaler")(Scaler())
    traced_partial = opsight.trace("partial")(functools.partial(pow, 2))
    result, frame = recorded(lambda: (traced_scaler(3), traced_partial(5)))
    assert result == (30, 32)
    assert names(frame) == ["scaler", "partial"]


# ---- C functions ------------------------------------------------------------------------

def test_c_functions():
    sqrt = opsight.trace(math.sqrt)
    length = opsight.trace(len)
    items = []
    append = opsight.trace(items.append)  # a bound builtin method
    upper = opsight.trace(str.upper)  # a method descriptor, called unbound

    result, frame = recorded(lambda: (sqrt(16.0), length("abc"), append(7), upper("x")))
    assert result == (4.0, 3, None, "X")
    assert items == [7]
    assert names(frame) == ["sqrt", "len", "list.append", "str.upper"]  # their __qualname__
    assert sqrt.__wrapped__ is math.sqrt
    assert sqrt.__name__ == "sqrt"


def test_c_function_exception():
    sqrt = opsight.trace(math.sqrt)

    def call():
        with pytest.raises(ValueError, match="math domain error"):
            sqrt(-1.0)

    _, frame = recorded(call)
    assert frame.iloc[0]["exception.type"] == "ValueError"
    assert frame.iloc[0]["exception.message"] == "math domain error"


def test_callables_that_do_not_bind_stay_unbound():
    class Holder:
        size = opsight.trace(len)
        root = opsight.trace(math.sqrt)
        scaled = opsight.trace("scaled")(functools.partial(pow, 3))

    holder = Holder()
    result, frame = recorded(lambda: (holder.size("ab"), holder.root(9.0), holder.scaled(2),
                                      Holder.size("abc")))
    assert result == (2, 3.0, 9, 3)
    assert names(frame) == ["len", "sqrt", "scaled", "len"]


def test_c_method_descriptor_binds_as_method():
    class Bag(list):
        traced_append = opsight.trace("Bag.append")(list.append)

    bag = Bag()
    _, frame = recorded(lambda: bag.traced_append(5))
    assert bag == [5]
    assert names(frame) == ["Bag.append"]


# ---- generators -------------------------------------------------------------------------

@opsight.trace
def countdown(n):
    """Counts down."""
    while n > 0:
        received = yield n
        n -= 1 if received is None else received
    return "liftoff"


def test_generator_function_stays_a_generator_function():
    assert inspect.isgeneratorfunction(countdown)
    assert countdown.__doc__ == "Counts down."
    assert inspect.signature(countdown) == inspect.signature(countdown.__wrapped__)


def test_generator_one_span_per_resume():
    result, frame = recorded(lambda: list(countdown(3)))
    assert result == [3, 2, 1]
    # three resumes that yield and the last one that returns
    assert names(frame) == ["countdown"] * 4
    assert (frame["depth"] == 0).all()
    assert frame["exception.type"].isna().all() if "exception.type" in frame else True


def test_generator_return_value_send_and_yield_from():
    def drive():
        generator = countdown(10)
        first = next(generator)
        second = generator.send(4)  # 10 - 4
        third = generator.send(6)  # 6 - 6 = 0: returns
        return first, second, third

    def delegate():
        return (yield from countdown(2))

    def call():
        with pytest.raises(StopIteration) as stop:
            drive()
        outer = delegate()
        values = list(outer)
        return stop.value.value, values

    (returned, values), frame = recorded(call)
    assert returned == "liftoff"
    assert values == [2, 1]
    assert names(frame) == ["countdown"] * 6


def test_generator_throw_and_close():
    @opsight.trace
    def guarded():
        try:
            yield 1
        except KeyError:
            yield "recovered"
        yield 2

    @opsight.trace
    def fragile():
        yield 1
        yield 2

    cleaned = []

    @opsight.trace
    def closable():
        try:
            yield 1
            yield 2
        finally:
            cleaned.append(True)

    def call():
        generator = guarded()
        next(generator)
        recovered = generator.throw(KeyError("k"))
        failing = fragile()
        next(failing)
        with pytest.raises(IndexError, match="boom"):
            failing.throw(IndexError("boom"))
        closing = closable()
        next(closing)
        closing.close()
        return recovered

    result, frame = recorded(call)
    assert result == "recovered"
    assert cleaned == [True]
    by_name = frame.groupby("name")
    fragile_spans = by_name.get_group(fragile.__qualname__).sort_values("start")
    assert list(fragile_spans["exception.type"].fillna("")) == ["", "IndexError"]
    assert fragile_spans.iloc[-1]["exception.message"] == "boom"
    # closing is a normal end: GeneratorExit is not an error
    closable_spans = by_name.get_group(closable.__qualname__)
    assert closable_spans["exception.type"].isna().all()


def test_generator_exception_raised_inside():
    @opsight.trace
    def broken():
        yield 1
        raise OSError("disk")

    def call():
        with pytest.raises(OSError, match="disk"):
            list(broken())

    _, frame = recorded(call)
    frame = frame.sort_values("start")
    assert list(frame["exception.type"].fillna("")) == ["", "OSError"]


def test_generator_span_covers_resume_not_consumer_time():
    import time

    @opsight.trace
    def slow_items():
        for _ in range(2):
            time.sleep(0.02)
            yield

    def consume():
        for _ in slow_items():
            time.sleep(0.1)  # the consumer's own time is not in the generator's spans

    _, frame = recorded(consume)
    yields = frame.sort_values("start").iloc[:2]
    assert (yields["dur"] >= 15e6).all()
    assert (yields["dur"] < 90e6).all()


# ---- opsight.span -----------------------------------------------------------------------

def test_span_with_attributes():
    def call():
        with opsight.span("tokenize", batch=8, ratio=0.5, model="bert", cached=True,
                          other=[1, 2]) as span:
            span.set("tokens", 128)
            add(1)

    _, frame = recorded(call)
    by_name = frame.set_index("name")
    row = by_name.loc["tokenize"]
    assert row["batch"] == 8 and row["ratio"] == 0.5 and row["model"] == "bert"
    assert row["cached"] == True  # noqa: E712 (numpy bool)
    assert row["other"] == "[1, 2]"
    assert row["tokens"] == 128
    assert by_name.loc["add", "parent_span_id"] == row["span_id"]


def test_span_exception_propagates_and_is_recorded():
    def call():
        with pytest.raises(AppError):
            with opsight.span("step"):
                raise AppError("in a block")

    _, frame = recorded(call)
    row = frame.iloc[0]
    assert row["exception.type"] == f"{__name__}.AppError"
    assert row["exception.message"] == "in a block"


def test_span_when_disabled_records_nothing():
    opsight.disable()
    try:
        def call():
            with opsight.span("quiet") as span:
                span.set("x", 1)
        _, frame = recorded(call)
    finally:
        opsight.enable()
    assert frame.empty


def test_a_span_object_entered_again_while_open_ends_each_use():
    step = opsight.span("step")

    @opsight.trace("work")
    def work(depth):
        with step:
            if depth:
                work(depth - 1)

    _, frame = recorded(lambda: (work(2), work(0)))
    assert not frame["unfinished"].any()
    assert names(frame) == ["work", "step", "work", "step", "work", "step", "work", "step"]
    assert list(frame.sort_values("start")["depth"]) == [0, 1, 2, 3, 4, 5, 0, 1]


def test_types_coroutine_generator_stays_awaitable():
    import asyncio
    import types

    @opsight.trace("pause")
    @types.coroutine
    def pause():
        yield
        return "resumed"

    async def main():
        return await pause()

    result, frame = recorded(lambda: asyncio.run(main()))
    assert result == "resumed"
    assert names(frame) == ["pause", "pause"]  # a span per resume, as for generators
