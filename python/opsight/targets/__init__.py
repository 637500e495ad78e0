"""Declarative targets files: what to trace in an unchanged Python program.

A targets file lists the functions and methods opsight wraps, in the spirit of HiQ's
declarative configuration: the program's code is not touched, the file says what to
trace. Each entry names a ``module`` (a dotted module name), an optional ``class``
(dotted for nested classes, ``Outer.Inner``), a ``function`` and optionally a ``tag``
(the span's display name) and ``metrics``. ``class`` and ``function`` may be fnmatch
glob patterns (``*Layer``, ``test_*``).

Three formats are read, chosen by the file's extension (``.yaml``/``.yml``, ``.json``,
``.csv``) or, for any other name, by looking at the content:

* YAML or JSON: a list of entries, or a mapping ``{version: 1, targets: [...]}``;
* CSV with a header row naming the columns (``module,class,function,tag,metrics``);
* HiQ's own headerless rows ``"module", "class", "function", "tag"`` with ``#`` comments.

Every problem raises :class:`TargetsError`, whose text names the file, the line, the
entry and the field (``targets.yaml:12: entry 3: field 'function': expected a string,
got int``) so a user can fix the file without reading this module. The schema and the
messages are documented in ``docs/targets.md``.

The package is pure Python (standard library and PyYAML) and has no state: every
function is safe to call from any thread. Modules: ``model`` (:class:`Target`,
:class:`TargetsError`), ``documents`` (YAML and JSON with line numbers), ``entries``
(entries and their fields), ``hiq_csv`` (CSV and HiQ's rows), ``names`` (the checks of
names and patterns), ``check`` (``opsight run --strict``).
"""

from __future__ import annotations

import csv
import json
import os
import re

import yaml

from .documents import _compose_json, _compose_yaml
from .entries import _targets_from_tree
from .export_section import _export_targets_from_tree
from .hiq_csv import _parse_csv
from .model import _ENTRY_KEYS, _EXTENSIONS, _HIQ_COLUMNS, FORMATS, Target, TargetsError

__all__ = ["Target", "TargetsError", "load_targets", "parse_targets", "load_export_targets",
           "FORMATS"]


def load_targets(path: str | os.PathLike) -> list[Target]:
    """Reads and checks the targets file at ``path``.

    The format comes from the extension (``.yaml``, ``.yml``, ``.json``, ``.csv``, in any
    case); any other name has its content sniffed. Raises :class:`TargetsError` for a
    file that cannot be used and ``OSError`` for one that cannot be read.
    """
    filename, text = _read_text(path)
    return parse_targets(text, filename=filename)


def load_export_targets(path: str | os.PathLike) -> list[str]:
    """The export targets of the file's ``export:`` section (YAML or JSON; ``[]`` for none,
    and for CSV), as ``opsight run --export`` takes them: ``["otlp=http://...", "zipkin"]``.
    Raises :class:`TargetsError` for a malformed section, ``OSError`` for an unreadable file."""
    filename, text = _read_text(path)
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return []
    format = _format_from_name(filename) or _sniff_format(text, filename)
    if format == "csv":
        return []
    root = _compose_json(text, filename) if format == "json" else _compose_yaml(text, filename)
    return _export_targets_from_tree(root, filename)


def _read_text(path: str | os.PathLike) -> tuple[str, str]:
    filename = os.fspath(path)
    if isinstance(filename, bytes):
        filename = os.fsdecode(filename)
    with open(filename, "rb") as stream:
        data = stream.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise TargetsError(
            f"not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})",
            file=filename,
            line=line,
        ) from None
    return filename, text


def parse_targets(
    text: str, *, filename: str = "<string>", format: str | None = None
) -> list[Target]:
    """Parses and checks the targets in ``text``.

    ``format`` is ``"yaml"``, ``"json"`` or ``"csv"``; when it is ``None`` the extension of
    ``filename`` decides, and failing that the content. ``filename`` is only used in
    messages and in each :class:`Target`'s ``file``. Raises :class:`TargetsError`.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        raise TargetsError("no targets: the file is empty", file=filename)
    if format is None:
        format = _format_from_name(filename) or _sniff_format(text, filename)
    else:
        normalized = format.lower()
        normalized = "yaml" if normalized == "yml" else normalized
        if normalized not in FORMATS:
            raise TargetsError(
                f"unknown format {format!r}; expected one of "
                + ", ".join(repr(name) for name in FORMATS),
                file=filename,
            )
        format = normalized
    if format == "csv":
        return _parse_csv(text, filename)
    if format == "json":
        root = _compose_json(text, filename)
    else:
        root = _compose_yaml(text, filename)
    return _targets_from_tree(root, filename)


# --- Formats ---------------------------------------------------------------------------


def _format_from_name(filename: str) -> str | None:
    return _EXTENSIONS.get(os.path.splitext(filename)[1].lower())


_YAML_START = re.compile(r"(---|\.\.\.|%YAML|-(\s|$)|[\"']?[A-Za-z_][\w.-]*[\"']?\s*:(\s|$))")
_CSV_CELL = re.compile(r"[\w.*?\[\]!-]*")


def _sniff_format(text: str, filename: str) -> str:
    """Guesses the format of a file whose name does not tell it."""
    first = next(
        (
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ),
        None,
    )
    if first is None:
        raise TargetsError("no targets: the file holds no entries", file=filename)
    if first[0] in "[{":
        try:
            json.loads(text)
            return "json"
        except ValueError as json_error:
            try:
                if isinstance(yaml.safe_load(text), (list, dict)):
                    return "yaml"
            except yaml.YAMLError:
                pass
            raise _unknown_format(filename, f"not valid JSON: {json_error}") from None
    cells = [cell.strip() for cell in next(csv.reader([first], skipinitialspace=True))]
    if len(cells) >= 2 and (
        first.startswith('"')
        or all(cell.lower() in _ENTRY_KEYS for cell in cells)
        or (len(cells) == len(_HIQ_COLUMNS) and all(_CSV_CELL.fullmatch(c) for c in cells))
    ):
        return "csv"
    if _YAML_START.match(first):
        return "yaml"
    raise _unknown_format(filename, f"the first line is {first[:60]!r}")


def _unknown_format(filename: str, detail: str) -> TargetsError:
    return TargetsError(
        "cannot tell the format of this targets file "
        f"({detail}); name it .yaml, .yml, .json or .csv",
        file=filename,
    )


# --- The tree (YAML and JSON) -----------------------------------------------------------


# --- CSV --------------------------------------------------------------------------------


# --- Checks shared by every format -------------------------------------------------------


