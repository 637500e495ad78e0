"""Installing a targets file into a running program (``opsight._capture.instrument``): the import
hook, modules already imported, nested classes, glob patterns, static and class methods,
async functions, C-extension callables, what cannot be wrapped, and taking it all out again."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pickle
import sys
import textwrap

import pytest

import opsight
from opsight._capture.instrument import Instrumenter
from opsight._native import TracedFunction
from opsight.targets import parse_targets

from conftest import write

MODEL = """
    import asyncio
    import functools
    import math
    from math import floor
    from os.path import join

    def preprocess(x):
        "Prepares."
        return x + 1

    def helper():
        return "helper"

    def test_alpha():
        return "a"

    def test_beta():
        return "b"

    async def fetch(x):
        await asyncio.sleep(0)
        return x * 2

    def batches(n):
        for index in range(n):
            yield index

    sqrt = math.sqrt

    class Model:
        scale = 3

        def forward(self, x):
            return x * self.scale

        @staticmethod
        def build(x):
            return ("built", x)

        @classmethod
        def create(cls):
            return cls()

        @property
        def size(self):
            return 1

        def __repr__(self):
            return "Model()"

        class Head:
            def forward(self, x):
                return ("head", x)

            class Tip:
                def forward(self):
                    return "tip"

    class LinearLayer:
        def forward(self, x):
            return x + 10

        def backward(self):
            return "linear back"

    class ConvLayer(LinearLayer):
        def forward(self, x):
            return x + 20

    class Unrelated:
        def forward(self, x):
            return x

    class Numbers(list):
        pass

    class Tools:
        # callables that do not bind as methods: called on an instance, they get no self
        measure = len
        root = math.sqrt
        clamp = functools.partial(max, 0)

        def own(self, x):
            return ("own", x)
"""


@pytest.fixture
def model_module(fresh_modules):
    write(fresh_modules, "model.py", MODEL)
    write(fresh_modules, "pkg/__init__.py", "")
    write(fresh_modules, "pkg/sub.py", """
        def run():
            return "sub"
    """)
    return fresh_modules


@pytest.fixture
def instrument():
    installed = []

    def install(text, filename="targets.yaml"):
        text = textwrap.dedent(text).lstrip("\n")
        instrumenter = Instrumenter(parse_targets(text, filename=filename))
        instrumenter.install()
        installed.append(instrumenter)
        return instrumenter

    yield install
    for instrumenter in installed:
        instrumenter.uninstall()


def recorded(action):
    with opsight.profile() as prof:
        result = action()
    return result, prof.dataframe()


def names(frame):
    return list(frame.sort_values("start")["name"])


def test_import_hook_wraps_a_module_imported_later(model_module, instrument):
    assert "model" not in sys.modules
    instrument("""
        - {module: model, function: preprocess}
        - {module: model, class: Model, function: forward, tag: "model forward"}
    """)
    import model

    assert isinstance(model.preprocess, TracedFunction)
    assert model.preprocess.__wrapped__.__doc__ == "Prepares."
    result, frame = recorded(lambda: (model.preprocess(1), model.Model().forward(2)))
    assert result == (2, 6)
    assert names(frame) == ["preprocess", "model forward"]


def test_module_already_imported_is_wrapped_at_once(model_module, instrument):
    model = importlib.import_module("model")
    original = model.preprocess
    instrument("- {module: model, function: preprocess}")
    assert model.preprocess is not original
    assert model.preprocess.__wrapped__ is original
    _, frame = recorded(lambda: model.preprocess(5))
    assert names(frame) == ["preprocess"]


def test_submodule_of_a_package(model_module, instrument):
    instrument("- {module: pkg.sub, function: run}")
    from pkg import sub

    result, frame = recorded(sub.run)
    assert result == "sub"
    assert names(frame) == ["run"]


def test_nested_classes(model_module, instrument):
    instrument("""
        - {module: model, class: Model.Head, function: forward}
        - {module: model, class: Model.Head.Tip, function: forward}
    """)
    import model

    result, frame = recorded(lambda: (model.Model.Head().forward(1), model.Model.Head.Tip().forward()))
    assert result == (("head", 1), "tip")
    assert names(frame) == ["Model.Head.forward", "Model.Head.Tip.forward"]


def test_glob_patterns_in_class_and_function(model_module, instrument):
    instrumenter = instrument("""
        - {module: model, class: "*Layer", function: forward}
        - {module: model, function: "test_*"}
    """)
    import model

    def call():
        return (model.LinearLayer().forward(1), model.ConvLayer().forward(1),
                model.Unrelated().forward(1), model.test_alpha(), model.test_beta(),
                model.helper())

    result, frame = recorded(call)
    assert result == (11, 21, 1, "a", "b", "helper")
    assert sorted(names(frame)) == ["ConvLayer.forward", "LinearLayer.forward", "test_alpha",
                                    "test_beta"]
    assert not isinstance(model.Unrelated.__dict__["forward"], TracedFunction)
    assert instrumenter.unresolved() == []


def test_function_pattern_skips_dunders_and_imported_names(model_module, instrument):
    instrument("""
        - {module: model, class: Model, function: "*"}
        - {module: model, function: "*"}
    """)
    import model

    assert not isinstance(model.Model.__dict__["__repr__"], TracedFunction)
    assert not isinstance(model.join, TracedFunction)  # from os.path, not model's own
    assert not isinstance(model.floor, TracedFunction)
    assert isinstance(model.Model.__dict__["forward"], TracedFunction)
    assert isinstance(model.helper, TracedFunction)
    assert isinstance(model.Model, type)  # classes are not wrapped as callables
    import os.path
    assert not isinstance(os.path.join, TracedFunction)


def test_static_and_class_methods(model_module, instrument):
    instrument("""
        - {module: model, class: Model, function: build}
        - {module: model, class: Model, function: create}
    """)
    import model

    assert isinstance(model.Model.__dict__["build"], staticmethod)
    assert isinstance(model.Model.__dict__["create"], classmethod)
    result, frame = recorded(lambda: (model.Model.build(1), model.Model().build(2),
                                      type(model.Model.create())))
    assert result == (("built", 1), ("built", 2), model.Model)
    assert names(frame) == ["Model.build", "Model.build", "Model.create"]


def test_methods_still_bind_and_keep_their_signature(model_module, instrument):
    import model

    signature = inspect.signature(model.Model.forward)
    instrument("- {module: model, class: Model, function: forward}")
    instance = model.Model()
    assert instance.forward.__self__ is instance
    assert inspect.signature(model.Model.forward) == signature
    assert model.Model.forward.__wrapped__.__qualname__ == "Model.forward"
    result, _ = recorded(lambda: instance.forward(4))
    assert result == 12


def test_async_function_and_generator_targets(model_module, instrument):
    instrument("""
        - {module: model, function: fetch}
        - {module: model, function: batches}
    """)
    import model

    assert inspect.iscoroutinefunction(model.fetch)
    assert inspect.isgeneratorfunction(model.batches)
    result, frame = recorded(lambda: (asyncio.run(model.fetch(2)), list(model.batches(2))))
    assert result == (4, [0, 1])
    assert names(frame) == ["fetch"] + ["batches"] * 3
    assert frame.sort_values("start").iloc[0]["thread"].startswith("asyncio Task-")


def test_c_extension_callables(model_module, instrument):
    instrumenter = instrument("""
        - {module: model, function: sqrt}
        - {module: model, function: floor}
        - {module: model, class: Numbers, function: append}
    """)
    import model

    numbers = model.Numbers()

    def call():
        numbers.append(3)
        return model.sqrt(9.0), model.floor(2.5)

    result, frame = recorded(call)
    assert result == (3.0, 2)
    assert numbers == [3]
    assert names(frame) == ["Numbers.append", "sqrt", "floor"]
    assert instrumenter.unresolved() == []
    # the inherited C method was added to the subclass; taking it out deletes it again
    assert "append" in vars(model.Numbers)
    instrumenter.disable()
    assert "append" not in vars(model.Numbers)
    assert model.Numbers.append is list.append


def test_class_attributes_that_do_not_bind_stay_unbound(model_module, instrument):
    instrumenter = instrument("- {module: model, class: Tools, function: '*'}")
    import model

    tools = model.Tools()

    def call():
        return tools.measure("abc"), tools.root(16.0), tools.clamp(-5), tools.own(1)

    result, frame = recorded(call)
    assert result == (3, 4.0, 0, ("own", 1))
    assert names(frame) == ["Tools.measure", "Tools.root", "Tools.clamp", "Tools.own"]
    assert instrumenter.unresolved() == []


def test_wrapped_targets_pickle_as_the_originals_do(model_module, instrument):
    write(model_module, "reexport.py", "from model import preprocess\n")
    instrument("""
        - {module: model, class: Model, function: forward}
        - {module: model, function: test_alpha}
        - {module: reexport, function: preprocess}
    """)
    import model
    import reexport

    # by reference to the wrapper, where its name leads to it
    assert pickle.loads(pickle.dumps(model.test_alpha)) is model.test_alpha
    assert pickle.loads(pickle.dumps(model.Model.forward)) is model.Model.forward
    # re-exported: its name (model.preprocess) leads to the original, as untraced
    assert isinstance(reexport.preprocess, TracedFunction)
    assert pickle.loads(pickle.dumps(reexport.preprocess)) is model.preprocess
    assert pickle.loads(pickle.dumps(model.Model())).forward(2) == 6


def test_immutable_types_and_properties_are_reported(model_module, instrument):
    instrumenter = instrument("""
        - {module: builtins, class: dict, function: get}
        - {module: collections, class: OrderedDict, function: move_to_end}
        - {module: model, class: Model, function: size}
    """, filename="app-targets.yaml")
    import model  # noqa: F401

    problems = {target.source: reason for target, reason in instrumenter.unresolved()}
    assert problems == {
        "app-targets.yaml:1 (entry 1)":
            "cannot wrap dict.get: cannot set 'get' attribute of immutable type 'dict'",
        "app-targets.yaml:2 (entry 2)":
            "cannot wrap OrderedDict.move_to_end: cannot set 'move_to_end' attribute of "
            "immutable type 'collections.OrderedDict'",
        "app-targets.yaml:3 (entry 3)": "Model.size is a property, not a function",
    }
    assert {}.get("x", 1) == 1


def test_unresolved_targets_say_why(model_module, instrument):
    instrumenter = instrument("""
        - {module: model, function: preprocess}
        - {module: model, function: missing}
        - {module: model, class: Nowhere, function: forward}
        - {module: model, function: "zzz*"}
        - {module: model, class: Model, function: absent}
        - {module: model, class: Model, function: scale}
        - {module: never_imported_module, function: f}
    """, filename="t.yaml")
    import model  # noqa: F401

    reasons = [(target.source, reason) for target, reason in instrumenter.unresolved()]
    assert reasons == [
        ("t.yaml:2 (entry 2)", "'missing' not found in module 'model'"),
        ("t.yaml:3 (entry 3)", "class 'Nowhere' not found in module 'model'"),
        ("t.yaml:4 (entry 4)", "no function matches 'zzz*'"),
        ("t.yaml:5 (entry 5)", "'absent' not found in class 'Model'"),
        ("t.yaml:6 (entry 6)", "'scale' in 'Model' is not callable"),
        ("t.yaml:7 (entry 7)", "module 'never_imported_module' was never imported"),
    ]


def test_exceptions_through_targets(model_module, instrument):
    write(model_module, "failing.py", """
        class QuotaError(Exception):
            pass

        def charge(amount):
            raise QuotaError(f"over quota by {amount}")
    """)
    instrument("- {module: failing, function: charge}")
    import failing

    def call():
        with pytest.raises(failing.QuotaError, match="over quota by 5") as caught:
            failing.charge(5)
        return caught.value

    error, frame = recorded(call)
    assert type(error) is failing.QuotaError
    assert frame.iloc[0]["exception.type"] == "failing.QuotaError"
    assert frame.iloc[0]["exception.message"] == "over quota by 5"


def test_disable_restores_the_originals_and_enable_reinstalls(model_module, instrument):
    import model

    original_function = model.preprocess
    original_static = model.Model.__dict__["build"]
    original_method = model.Model.__dict__["forward"]
    instrumenter = instrument("""
        - {module: model, function: preprocess}
        - {module: model, class: Model, function: build}
        - {module: model, class: Model, function: forward}
    """)
    wrapped_function = model.preprocess
    assert wrapped_function is not original_function

    instrumenter.disable()
    assert model.preprocess is original_function
    assert model.Model.__dict__["build"] is original_static
    assert model.Model.__dict__["forward"] is original_method
    _, frame = recorded(lambda: (model.preprocess(1), model.Model.build(1)))
    assert frame.empty

    instrumenter.enable()
    assert model.preprocess is wrapped_function
    _, frame = recorded(lambda: model.preprocess(1))
    assert names(frame) == ["preprocess"]

    instrumenter.uninstall()
    assert model.preprocess is original_function
    assert not any(type(finder).__name__ == "ImportHook" for finder in sys.meta_path)


def test_module_imported_while_disabled_is_wrapped_on_enable(model_module, instrument):
    instrumenter = instrument("- {module: model, function: preprocess}")
    instrumenter.disable()
    import model

    assert not isinstance(model.preprocess, TracedFunction)
    instrumenter.enable()
    assert isinstance(model.preprocess, TracedFunction)


def test_a_replacement_by_the_program_is_left_alone(model_module, instrument):
    import model

    instrumenter = instrument("- {module: model, function: preprocess}")

    def program_own(x):
        return "own"

    model.preprocess = program_own
    instrumenter.disable()
    assert model.preprocess is program_own
    instrumenter.enable()
    assert model.preprocess is program_own


def test_opsight_disable_switches_installed_targets(model_module, instrument):
    from opsight._capture import instrument as instrument_module

    import model

    original = model.preprocess
    instrumenter = instrument("- {module: model, function: preprocess}")
    instrument_module.installed = instrumenter
    try:
        opsight.disable()
        assert model.preprocess is original
        assert not opsight.enabled()
        opsight.enable()
        assert model.preprocess is not original
        assert model.preprocess.__wrapped__ is original
    finally:
        instrument_module.installed = None


def test_targets_from_json_and_csv_files(model_module, tmp_path):
    from opsight.targets import load_targets

    json_path = write(tmp_path, "targets.json", """
        {"targets": [{"module": "model", "class": "Model", "function": "forward"}]}
    """)
    csv_path = write(tmp_path, "targets.csv", """
        module,class,function,tag
        model,,preprocess,prep
    """)
    hiq_path = write(tmp_path, "targets.hiq", """
        # HiQ's own rows
        "model", "", "helper", "help"
    """)
    instrumenters = [Instrumenter(load_targets(path)) for path in (json_path, csv_path, hiq_path)]
    for instrumenter in instrumenters:
        instrumenter.install()
    try:
        import model

        _, frame = recorded(lambda: (model.Model().forward(1), model.preprocess(1), model.helper()))
        assert names(frame) == ["Model.forward", "prep", "help"]
    finally:
        for instrumenter in instrumenters:
            instrumenter.uninstall()


def test_reloaded_module_is_wrapped_again(model_module, instrument):
    instrument("""
        - {module: model, function: preprocess}
    """)
    import model

    assert isinstance(model.preprocess, TracedFunction)
    importlib.reload(model)  # runs the module's code again: a new, unwrapped function
    assert isinstance(model.preprocess, TracedFunction)
    _, frame = recorded(lambda: model.preprocess(1))
    assert names(frame) == ["preprocess"]
