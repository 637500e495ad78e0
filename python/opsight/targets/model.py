"""The targets model: :class:`Target` (one entry of a targets file) and
:class:`TargetsError` (every problem, with the file, line, entry and field), and the
schema's constants."""

from __future__ import annotations

from dataclasses import dataclass

import opsight._native as _native



#: The formats ``parse_targets`` accepts for its ``format`` argument.
FORMATS = ("yaml", "json", "csv")


_EXTENSIONS = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".csv": "csv"}


_ENTRY_KEYS = ("module", "class", "function", "tag", "metrics")


_REQUIRED_KEYS = ("module", "function")


_TOP_LEVEL_KEYS = ("targets", "version", "export")

#: The kinds an export target starts with: every spelling of the core's sinks
#: (src/export/sink.hpp's table, through ``_native.export_sinks()``; ``prometheus`` is
#: ``opsight run``'s live /metrics endpoint). A targets file's ``export:`` section,
#: ``OPSIGHT_EXPORT`` and ``--export`` name the same kinds.
EXPORT_KINDS = tuple(spelling for sink in _native.export_sinks() for spelling in sink["spellings"])


_SUPPORTED_VERSION = 1


_GLOB_CHARACTERS = "*?["


_HIQ_COLUMNS = ("module", "class", "function", "tag")


# Containers nested deeper than a metric name inside an entry are only described by
# their type in messages; their contents are never looked at.
_MAXIMUM_DEPTH = 5


class TargetsError(ValueError):
    """A targets file that cannot be used, with where and why.

    ``file`` is the name given to the parser, ``line`` the 1-based line of the offending
    entry or field (``None`` when the problem is the whole file, e.g. an empty one),
    ``column`` the 1-based column for syntax errors (else ``None``), ``entry`` the 1-based
    index of the entry (else ``None``), ``field`` the key or column concerned (else
    ``None``) and ``message`` the problem itself. ``str(error)`` joins them:
    ``targets.yaml:12: entry 3: field 'function': expected a string, got int``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str = "<string>",
        line: int | None = None,
        field: str | None = None,
        entry: int | None = None,
        column: int | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        self.entry = entry
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        location = self.file
        if self.line is not None:
            location += f":{self.line}"
            if self.column is not None:
                location += f":{self.column}"
        text = location + ": "
        if self.entry is not None:
            text += f"entry {self.entry}: "
        if self.field is not None:
            text += f"field '{self.field}': "
        return text + self.message

    def __str__(self) -> str:
        return self._format()

    def __reduce__(self):  # keeps the attributes through pickling (multiprocessing)
        return (
            _rebuild_error,
            (self.message, self.file, self.line, self.field, self.entry, self.column),
        )


def _rebuild_error(message, file, line, field, entry, column) -> TargetsError:
    return TargetsError(
        message, file=file, line=line, field=field, entry=entry, column=column
    )


@dataclass(frozen=True)
class Target:
    """One entry of a targets file: a function or method (or a pattern of them) to trace.

    ``class_name`` is ``None`` for a module-level function and dotted for nested classes.
    ``tag`` is ``None`` when the file gives none; the caller picks the default name.
    ``file``, ``line`` and ``entry`` say where the entry was declared.
    """

    module: str
    function: str
    class_name: str | None = None
    tag: str | None = None
    metrics: tuple[str, ...] = ()
    file: str = "<string>"
    line: int = 0
    entry: int = 0

    @property
    def source(self) -> str:
        """Where the entry was declared: ``targets.yaml:12 (entry 3)``."""
        return f"{self.file}:{self.line} (entry {self.entry})"

    @property
    def has_pattern(self) -> bool:
        """Whether ``class_name`` or ``function`` holds glob characters (``*?[``)."""
        return _is_pattern(self.function) or (
            self.class_name is not None and _is_pattern(self.class_name)
        )

    @property
    def qualname(self) -> str:
        """``Class.function`` or ``function``: the part after the module name."""
        if self.class_name is None:
            return self.function
        return f"{self.class_name}.{self.function}"


def _is_pattern(text: str) -> bool:
    return any(char in text for char in _GLOB_CHARACTERS)
