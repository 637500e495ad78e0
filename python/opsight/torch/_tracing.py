"""torch operators and module calls as opsight spans.

Operators: a global RecordFunction callback (torch's own observer mechanism, the one the
PyTorch profiler uses) in the native extension ``opsight._torch_observer``, built against
the installed torch: each ``aten::*`` operator a thread runs is a span (category
``operator``), nested under whatever span the thread had open, on opsight's clock.
``record_function`` ranges are spans of category ``annotation``.

Modules: ``nn.Module.__call__``, replaced while recording, makes each ``nn.Module`` call
a span (category ``module``) named by the module's path from the
outermost module called, e.g. ``encoder.layer.3.attention``; the outermost module's span
is its class name.

Thread-safety: enable/disable and the session callbacks run under the GIL; the operator
callback runs on whatever thread torch runs an operator on.
"""

from __future__ import annotations

import contextlib
import sys
import time
import weakref
from dataclasses import dataclass
from typing import Any, Iterator

import torch

import opsight._native as _native

CATEGORY_MODULE = "module"


@dataclass(frozen=True)
class TorchTracing:
    """What is recorded: operators (with input shapes or not) and module calls."""

    operators: bool = True
    modules: bool = True
    shapes: bool = False

    @staticmethod
    def from_mode(mode: str) -> "TorchTracing":
        return {
            "on": TorchTracing(),
            "shapes": TorchTracing(shapes=True),
            "operators": TorchTracing(modules=False),
            "modules": TorchTracing(operators=False),
        }.get(mode, TorchTracing(operators=False, modules=False))


class _State:
    def __init__(self) -> None:
        self.applied = TorchTracing(operators=False, modules=False)
        self.explicit = False  # enable() was called: sessions do not switch it off
        # What opsight.disable() switched off, put back by opsight.enable(); None when
        # tracing is not switched off.
        self.suspended: TorchTracing | None = None
        self.warned: set[str] = set()


_state = _State()
_observer_module: Any = None


def _warn_once(key: str, message: str) -> None:
    if key not in _state.warned:
        _state.warned.add(key)
        print(f"opsight: warning: {message}", file=sys.stderr)


def _observer() -> Any:
    """The native operator observer, or None after a warning saying why it cannot run."""
    global _observer_module
    if _observer_module is not None:
        return _observer_module
    try:
        import opsight._torch_observer as observer
    except ImportError as error:
        _warn_once("observer", "torch operators are not recorded: opsight was installed "
                   "without its operator observer for this torch "
                   f"({error}); reinstall opsight with torch installed "
                   "(pip install --no-build-isolation .)")
        return None
    if observer.built_for_torch != torch.__version__:
        _warn_once("observer", "torch operators are not recorded: opsight's operator "
                   f"observer was built for torch {observer.built_for_torch}, this is torch "
                   f"{torch.__version__}; reinstall opsight (pip install --no-build-isolation .)")
        return None
    _observer_module = observer
    return observer


# ---- module calls ------------------------------------------------------------------------
class _ModuleNames:
    """Span name ids of modules by path, found once per module: the first time a module
    is called with no known module around it, it and everything under it get their paths
    (the outermost module is named by its class, the others by their path from it); a
    module met later under a known module is named from that module's path. Only a first
    sighting comes here: the recorder (``_native.ModuleCallRecorder``) keeps every id it
    was given, by module."""

    def __init__(self) -> None:
        self._ids: "weakref.WeakKeyDictionary[torch.nn.Module, int]" = weakref.WeakKeyDictionary()
        # The prefix of the paths under a module: "" under an outermost module.
        self._prefix_under: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = \
            weakref.WeakKeyDictionary()

    def name_id(self, module: torch.nn.Module, parent: torch.nn.Module | None) -> int:
        found = self._ids.get(module)
        if found is not None:
            return found
        if parent is not None and parent in self._prefix_under:
            self._assign(parent, self._prefix_under[parent], root_path=None)
        if module not in self._ids:  # an outermost module, or one called on the side
            self._assign(module, "", root_path=type(module).__name__)
        return self._ids[module]

    def _assign(self, root: torch.nn.Module, prefix: str, root_path: str | None) -> None:
        for name, module in root.named_modules():
            if module in self._ids:
                continue
            if not name:
                path = root_path or prefix
                self._prefix_under[module] = "" if root_path else prefix
            else:
                path = f"{prefix}.{name}" if prefix else name
                self._prefix_under[module] = path
            self._ids[module] = _native.register_name(path, CATEGORY_MODULE)


_module_names = _ModuleNames()

# While TorchDynamo traces a module (torch.compile), nothing is recorded: dynamo folds this
# check to a constant, so recording never puts a graph break into a compiled model.
_is_compiling = torch.compiler.is_compiling
# nn.Module.__call__ as torch defines it, while ours stands in for it.
_original_call: Any = None
# The C recorder of module calls (python/src/module_call_recorder.cc), made at install.
_record_call: Any = None
# What one recorded module call costs the program beyond the recorder's two events (ns):
# measured once per process, charged to the tracer overhead of every recorded call.
_call_charge_ns: float | None = None


def _traced_call(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    """nn.Module.__call__ with a span around it. A replacement of the class attribute
    rather than global forward hooks: those move every module call onto torch's slow path,
    which costs several times what this wrapper does (docs/torch.md, "Cost"). It stays a
    Python function so that dynamo can inline it; everything else is in C."""
    if _is_compiling():
        return _original_call(self, *args, **kwargs)
    return _record_call(self, args, kwargs)


class _CalibrationModule(torch.nn.Module):
    def forward(self, value: Any) -> Any:
        return value


def _measure_call_charge_ns(original_call: Any) -> float:
    """What the wrapper adds to a module call, beside torch's own __call__ (ns): a trivial
    module called through a calibrating recorder (every step but the span's two events,
    which the recorder charges itself) against torch's __call__, 7 alternating batches of
    200 calls, the fastest of each; never negative. About 4 ms, once per process."""
    global _record_call
    module = _CalibrationModule()
    live = _record_call
    _record_call = _native.ModuleCallRecorder(original_call, lambda _module, _parent: 1,
                                              calibrating=True)
    try:
        with_wrapper = without_wrapper = float("inf")
        for _ in range(7):
            began = time.perf_counter_ns()
            for _ in range(200):
                _traced_call(module, None)
            with_wrapper = min(with_wrapper, (time.perf_counter_ns() - began) / 200)
            began = time.perf_counter_ns()
            for _ in range(200):
                original_call(module, None)
            without_wrapper = min(without_wrapper, (time.perf_counter_ns() - began) / 200)
    finally:
        _record_call = live
    return max(0.0, with_wrapper - without_wrapper)


def _install_module_spans() -> None:
    global _original_call, _record_call, _call_charge_ns
    if torch.nn.Module.__call__ is _traced_call:
        return
    original = torch.nn.Module.__call__
    if _call_charge_ns is None:
        _call_charge_ns = _measure_call_charge_ns(original)
    if _record_call is None or _original_call is not original:
        _record_call = _native.ModuleCallRecorder(original, _module_names.name_id,
                                                  charge_ns=_call_charge_ns)
    _original_call = original
    torch.nn.Module.__call__ = _traced_call


def _remove_module_spans() -> None:
    if torch.nn.Module.__call__ is _traced_call:
        torch.nn.Module.__call__ = _original_call


def module_call_charge_ns() -> float | None:
    """What one recorded module call adds to the tracer overhead (ns), once measured."""
    return _call_charge_ns


# ---- switching ---------------------------------------------------------------------------
_NOTHING = TorchTracing(operators=False, modules=False)


def _apply(wanted: TorchTracing) -> None:
    if _state.suspended is not None:  # switched off: kept for when tracing is back on
        _state.suspended = wanted
        wanted = _NOTHING
    current = _state.applied
    if wanted.operators != current.operators or (wanted.operators and wanted.shapes != current.shapes):
        observer = _observer() if wanted.operators else _observer_module
        if observer is not None:
            if wanted.operators:
                observer.install(record_shapes=wanted.shapes)
            else:
                observer.uninstall()
        elif wanted.operators:
            wanted = TorchTracing(operators=False, modules=wanted.modules)
    if wanted.modules != current.modules:
        if wanted.modules:
            _install_module_spans()
        else:
            _remove_module_spans()
    _state.applied = wanted


def enable(*, operators: bool = True, modules: bool = True, shapes: bool = False) -> None:
    """Records torch operators (``aten::*``, with their input shapes if ``shapes``) and
    module calls as spans whenever a session records, until :func:`disable`; sessions
    started later leave this choice alone. Without this call, a session switches the
    default on by itself (see ``OPSIGHT_TORCH``)."""
    _state.explicit = True
    _apply(TorchTracing(operators=operators, modules=modules, shapes=shapes))


def disable() -> None:
    """Stops recording torch operators and module calls (removes the observer and puts
    nn.Module.__call__ back) until :func:`enable` is called; later sessions do not switch
    them on again."""
    _state.explicit = True
    _apply(TorchTracing(operators=False, modules=False))


@contextlib.contextmanager
def tracing(*, operators: bool = True, modules: bool = True,
            shapes: bool = False) -> Iterator[None]:
    """:func:`enable` for a block: afterwards, what was in force before (an earlier
    enable()/disable(), or the sessions' automatic default) is back."""
    applied, explicit = _state.applied, _state.explicit
    enable(operators=operators, modules=modules, shapes=shapes)
    try:
        yield
    finally:
        _apply(applied)
        _state.explicit = explicit


def status() -> dict[str, bool]:
    """What is recorded now: ``{"operators", "modules", "shapes", "explicit"}``."""
    applied = _state.applied
    return {"operators": applied.operators, "modules": applied.modules,
            "shapes": applied.shapes, "explicit": _state.explicit}


def session_started(mode: str) -> None:
    """A session started (opsight.torch._integration): switch the default on."""
    if not _state.explicit:
        _apply(TorchTracing.from_mode(mode))


def session_stopping() -> None:
    """The session is stopping: what it switched on goes off (no cost outside sessions).
    The operators this thread recorded are charged to its overhead first."""
    if _observer_module is not None:
        _observer_module.flush_charges()
    if not _state.explicit:
        _apply(TorchTracing(operators=False, modules=False))


def switched(enabled: bool) -> None:
    """opsight.disable() (or ``opsight ctl PID off``): operators and module calls stop being
    observed at all (the observer removed, nn.Module.__call__ put back), so a program
    switched off pays nothing for them; opsight.enable() puts back what was in force, or
    what a session or enable() asked for meanwhile."""
    if not enabled and _state.suspended is None:
        applied = _state.applied
        _apply(_NOTHING)
        _state.suspended = applied
    elif enabled and _state.suspended is not None:
        wanted, _state.suspended = _state.suspended, None
        _apply(wanted)
