"""The one interface through which integrations (torch, ONNX Runtime, ...) take part in a
recording session, in the spirit of OpenTelemetry's span processors.

An :class:`Integration` overrides the hooks it needs:

* ``on_start()``: a session started (or was already running when the integration was
  registered). torch starts recording operators and module calls here.
* ``on_stop()``: the session is about to stop; what ``on_start`` switched on goes off.
* ``finished_traces(begin_ns, end_ns)``: after the session stopped, traces of the
  integration's own to append to the recording, each with the shift (ns) that puts its
  timestamps on the recording's clock (CLOCK_MONOTONIC); the window is the recording's.
  ONNX Runtime's node-level profile is merged this way.
* ``on_switch(enabled)``: tracing was switched off or back on inside the process
  (``opsight.disable()``/``enable()``, ``opsight ctl PID off|on``); what the integration
  observes should cost nothing while off.
* ``wrap_target(module, target)``: a targets-file entry of ``module`` is about to be
  wrapped; an integration that owns it (ONNX Runtime's ``InferenceSession.run``) handles it
  and returns True, and it is not wrapped as an ordinary function.

A library's integration acts once the program imports the library, during a session, and
never imports it on the program's behalf: :class:`ImportWatch` (started in ``on_start``,
stopped in ``on_stop``). Its environment variable (``OPSIGHT_TORCH``, ``OPSIGHT_ONNXRUNTIME``)
switches it: :func:`mode_from_environment`, ``on`` by default, ``off`` (or 0, false, no, none)
to leave the library alone.

The package registers its integrations when ``opsight`` is imported (``opsight/__init__``);
a program may register its own with :func:`register`. Every hook runs under the GIL, and a
hook that raises is a warning on stderr, never an exception in the traced program: an
integration must not change the program's outcome.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, Callable

from .._capture import instrument
from .._capture.import_hook import ImportHook
from . import state

#: The values of an integration's environment variable that switch it off.
OFF_WORDS = ("off", "0", "false", "no", "none")
#: The values that mean ``on``.
ON_WORDS = ("on", "1", "true", "yes")


class Integration:
    """Base class of the integrations; see the module's documentation. Every hook does
    nothing by default."""

    #: Shown in warnings about this integration.
    name = "integration"

    def on_start(self) -> None:
        """A recording session started."""

    def on_stop(self) -> None:
        """The recording session is about to stop."""

    def finished_traces(self, begin_ns: int, end_ns: int) -> list[tuple[Any, int]]:
        """Traces to append to the stopped recording: ``[(trace, shift_ns)]``."""
        return []

    def on_switch(self, enabled: bool) -> None:
        """Tracing was switched off (False) or back on (True)."""

    def wrap_target(self, module: Any, target: Any) -> bool:
        """Whether this integration handled the targets entry ``target`` of ``module``."""
        return False


def mode_from_environment(variable: str, modes: tuple[str, ...] = ("on",)) -> str:
    """What an integration's environment variable asks for: ``"off"`` for one of
    :data:`OFF_WORDS`, ``"on"`` when it is unset, empty or one of :data:`ON_WORDS`, else
    one of ``modes`` (lower case); anything else is a warning on stderr and ``"on"``."""
    raw = os.environ.get(variable, "on")
    mode = raw.strip().lower() or "on"
    if mode in OFF_WORDS:
        return "off"
    if mode in ON_WORDS:
        return "on"
    if mode not in modes:
        print(f"opsight: ignoring {variable}={raw!r} (expected {', '.join(modes)} or off)",
              file=sys.stderr)
        return "on"
    return mode


class ImportWatch:
    """Calls ``integration.<hook>()`` (through :func:`call`: a failure is a warning) once the
    library ``module_name`` is imported, while a session records. :meth:`start` (from
    ``on_start``) calls it at once if the library is imported and ``ready(module)`` holds,
    else hooks the library's import; :meth:`stop` (from ``on_stop``) removes the hook. The
    library is never imported on the program's behalf."""

    def __init__(self, integration: "Integration", module_name: str, hook: str,
                 ready: Callable[[types.ModuleType], bool] = lambda module: True) -> None:
        self._integration = integration
        self._module_name = module_name
        self._hook = hook
        self._ready = ready
        self._finder: ImportHook | None = None

    def start(self) -> None:
        module = sys.modules.get(self._module_name)
        if module is not None and self._ready(module):
            call(self._integration, self._hook)
        elif self._finder is None:
            self._finder = ImportHook(lambda name: name == self._module_name, self._imported)
            sys.meta_path.insert(0, self._finder)

    def stop(self) -> None:
        if self._finder is not None:
            if self._finder in sys.meta_path:
                sys.meta_path.remove(self._finder)
            self._finder = None

    def _imported(self, module: types.ModuleType) -> None:
        if state.session is not None:
            call(self._integration, self._hook)


_registered: list[Integration] = []


def register(integration: Integration) -> None:
    """Adds ``integration`` (once). If a session is running, its ``on_start`` runs now."""
    if any(existing is integration for existing in _registered):
        return
    _registered.append(integration)
    if state.session is not None:
        call(integration, "on_start")


def registered() -> tuple[Integration, ...]:
    return tuple(_registered)


def call(integration: Integration, hook: str, *arguments: Any) -> Any:
    """``integration.hook(*arguments)``; a failure is a warning and returns None."""
    try:
        return getattr(integration, hook)(*arguments)
    except Exception as error:  # noqa: BLE001 - an integration's failure is a warning
        print(f"opsight: warning: {integration.name}.{hook}: {type(error).__name__}: {error}",
              file=sys.stderr)
        return None


def started() -> None:
    """Every integration's ``on_start``, in registration order."""
    for integration in list(_registered):
        call(integration, "on_start")


def stopping() -> None:
    """Every integration's ``on_stop``, in reverse registration order."""
    for integration in reversed(list(_registered)):
        call(integration, "on_stop")


def switched(enabled: bool) -> None:
    """Every integration's ``on_switch(enabled)``, in registration order."""
    for integration in list(_registered):
        call(integration, "on_switch", enabled)


def finished_traces(begin_ns: int, end_ns: int) -> list[tuple[Any, int]]:
    """The traces every integration adds to a recording of [begin_ns, end_ns]."""
    traces: list[tuple[Any, int]] = []
    for integration in list(_registered):
        traces += call(integration, "finished_traces", begin_ns, end_ns) or []
    return traces


def wrap_target(module: Any, target: Any) -> bool:
    """Whether an integration handled a targets entry (see :meth:`Integration.wrap_target`)."""
    return any(call(integration, "wrap_target", module, target)
               for integration in list(_registered))


# A targets entry an integration owns is not wrapped as a function (every Instrumenter).
instrument.set_target_claimer(wrap_target)
