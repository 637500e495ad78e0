"""Python ``logging`` in the trace: the program's own log records, recorded where they were
logged, as OpenTelemetry's logging bridge records them (docs/export.md, *Log records*).

While a session records (``opsight run``, ``OPSIGHT_OUTPUT``, ``opsight.profile()``), each
record a logger handles becomes an instant in category ``log`` of the thread (or asyncio
task) that logged it, at that moment, so that the span open there is its span: the
``otlp-logs`` and ``loki-logs`` exporters send it with that span's trace and span ids. (The
instant is on the thread's ``logs`` lane and names the track it was logged on: an argument
written after an instant is the instant's until its track's next begin or end, so on the
span's own track what the span gets after the record would go to the record.)
The instant is named by the level (``WARNING``) and carries (``src/schema/log_names.hpp``):
the level's number (``log.level``), the formatted message (``log.message``), the logger's
name (``logger.name``), where it was logged (``code.file.path``, ``code.line.number``,
``code.function.name``; ``code.stacktrace`` for ``stack_info=True``), the exception logged
with it (``exception.type``, ``exception.message``, ``exception.stacktrace``), and the
fields the program added with ``extra=``.

Which records: those the program's loggers let through (their levels and filters decide
first, as for any handler; nothing is changed in them) at ``OPSIGHT_LOGS``'s level or
above: ``INFO`` by default, so a program that asks for INFO records (``basicConfig(level=
logging.INFO)``) gets them in its trace as an OpenTelemetry user expects, and one that left
logging at its default (WARNING) gets its warnings and errors. ``OPSIGHT_LOGS`` takes a level
name or number (``DEBUG``, ``WARNING``, ``25``), or ``off`` (also 0, false, no, none).

How it hooks in: ``logging.Logger.callHandlers`` is wrapped while the session records (and
put back when it stops, or while tracing is switched off), and records each record before
the program's handlers run. It adds no handler: a handler on the root logger would turn
the program's own ``logging.basicConfig()`` into a no-op (it configures only a root logger
without handlers) and silence ``logging.lastResort`` (the stderr output of a program that
configured nothing), both of which change what the program prints. A record is recorded
once, in the logger that handles it, even when it propagates to several loggers' handlers;
a logger with ``propagate=False`` is seen too. ``logging`` is never imported on the
program's behalf: the hook goes in when the program imports it.

Cost: nothing for a program that logs nothing, or whose loggers' levels stop its records
(logging then never calls ``callHandlers``). A recorded record costs its message formatted
once more and one call into the core, about 1.2 µs; one let through below the bridge's
level, its level test (``benchmarks/python/logging_bridge.py``, docs/export.md). The bridge
never raises into the program: a record it cannot read is skipped.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
import types
from typing import Any, Callable

import opsight._native as _native
from .._session import integrations, state
from .._session.integrations import Integration

#: The environment variable that sets the bridge's level, or switches it off.
LEVEL_VARIABLE = "OPSIGHT_LOGS"
#: The level recorded by default: INFO and above.
DEFAULT_LEVEL = 20
#: The category of the instants a record becomes (schema::kLogCategory).
CATEGORY = "log"

#: The attribute on the wrapped ``Logger.callHandlers`` that holds the one it replaced.
_ORIGINAL = "__opsight_logs_original__"


def level_from_environment() -> int | None:
    """``OPSIGHT_LOGS`` as a level number (``INFO`` when unset, empty or on), or None for off;
    anything else is a warning on stderr and the default."""
    raw = os.environ.get(LEVEL_VARIABLE, "")
    text = raw.strip()
    if not text or text.lower() in integrations.ON_WORDS:
        return DEFAULT_LEVEL
    if text.lower() in integrations.OFF_WORDS:
        return None
    level = _level_from_text(text)
    if level is None:
        print(f"opsight: ignoring {LEVEL_VARIABLE}={raw!r} (expected a logging level such as "
              f"INFO, WARNING or 25, or off)", file=sys.stderr)
        return DEFAULT_LEVEL
    return level


_LEVELS = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARNING": 30, "WARN": 30, "INFO": 20,
           "DEBUG": 10, "NOTSET": 0}


def _level_from_text(text: str) -> int | None:
    if text.lstrip("-").isdigit():
        return int(text)
    level = _LEVELS.get(text.upper())
    logging = sys.modules.get("logging")
    if level is None and logging is not None:  # a level the program registered
        level = logging.getLevelName(text.upper())
    return level if isinstance(level, int) else None


# ---- one record -------------------------------------------------------------------------------

_name_ids: dict[str, int] = {}      # level name -> the instant's name id (category "log")
_reserved: frozenset[str] = frozenset()  # a LogRecord's own attributes: the rest are extras
_plain_size = 0  # how many attributes a record logging made has (one without extras)


def _exception_type_name(kind: type) -> str:
    """``ValueError`` for built-in exceptions, ``package.module.Error`` for the others (as a
    span's ``exception.type``)."""
    module = getattr(kind, "__module__", "")
    name = getattr(kind, "__qualname__", kind.__name__)
    return name if module in ("builtins", "", None) else f"{module}.{name}"


def _record(record: Any) -> None:
    """Records ``record`` on the calling thread; never raises."""
    try:
        level_name = record.levelname
        name_id = _name_ids.get(level_name)
        if name_id is None:
            name_id = _name_ids[level_name] = _native.register_name(str(level_name), CATEGORY)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - logging reports it in its own handlers
            message = str(record.msg)
        exception_type = exception_message = exception_stacktrace = ""
        exc_info = record.exc_info
        if exc_info and isinstance(exc_info, tuple) and exc_info[0] is not None:
            kind, value, trace = exc_info
            exception_type = _exception_type_name(kind)
            try:
                exception_message = str(value)
            except Exception:  # noqa: BLE001
                exception_message = "<unprintable>"
            exception_stacktrace = "".join(traceback.format_exception(kind, value, trace))
        fields = record.__dict__
        extras = None
        # The program's extra= fields (numbers and booleans typed, anything else its str()),
        # looked for only when the record has more attributes than logging's own.
        extra_keys = fields.keys() - _reserved if len(fields) > _plain_size else ()
        if extra_keys:
            extras = []
            for key in sorted(extra_keys):
                value = fields[key]
                if not isinstance(value, (str, int, float)):
                    try:
                        value = str(value)
                    except Exception:  # noqa: BLE001 - an unprintable field is left out
                        continue
                extras.append((key, value))
        _native.log_record(name_id, record.levelno, message, record.name,
                           record.pathname or "", record.lineno or 0, record.funcName or "",
                           exception_type, exception_message, exception_stacktrace,
                           record.stack_info or "", extras)
    except Exception:  # noqa: BLE001 - the bridge must not change the program's outcome
        pass


def _bridged(original: Callable, level: int) -> Callable:
    """``Logger.callHandlers`` recording each record at ``level`` or above first."""
    recording = _native.recording

    @functools.wraps(original)
    def callHandlers(self: Any, record: Any) -> None:  # noqa: N802 - logging's name
        try:
            if record.levelno >= level and recording():
                _record(record)
        except Exception:  # noqa: BLE001 - a record without levelno is logging's to report
            pass
        return original(self, record)

    setattr(callHandlers, _ORIGINAL, original)
    return callHandlers


# ---- the integration ----------------------------------------------------------------------------

class LogsIntegration(Integration):
    """Records the program's logging records while a session runs (see the module's
    documentation)."""

    name = "opsight.integrations.logs"

    def __init__(self) -> None:
        self._level: int | None = None
        self._watch = integrations.ImportWatch(self, "logging", "_install")

    def on_start(self) -> None:
        self._level = level_from_environment()
        if self._level is not None:
            self._watch.start()

    def on_stop(self) -> None:
        self._watch.stop()
        self._uninstall()
        self._level = None

    def on_switch(self, enabled: bool) -> None:
        if self._level is None:
            return
        if not enabled:
            self._uninstall()
        elif "logging" in sys.modules and state.session is not None:
            self._install()

    def _install(self) -> None:
        global _reserved, _plain_size
        import logging

        if self._level is None:
            return
        if not _reserved:
            plain = vars(logging.LogRecord("", 0, "", 0, "", None, None))
            _plain_size = len(plain)
            _reserved = frozenset(plain) | {"message", "asctime", "taskName"}
        current = logging.Logger.__dict__.get("callHandlers")
        if current is None or hasattr(current, _ORIGINAL):
            return
        logging.Logger.callHandlers = _bridged(current, self._level)

    def _uninstall(self) -> None:
        logging = sys.modules.get("logging")
        if not isinstance(logging, types.ModuleType):
            return
        current = logging.Logger.__dict__.get("callHandlers")
        original = getattr(current, _ORIGINAL, None)
        if original is not None:
            logging.Logger.callHandlers = original


__all__ = ["LogsIntegration", "level_from_environment", "LEVEL_VARIABLE", "DEFAULT_LEVEL"]
