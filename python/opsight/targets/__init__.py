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

This module is pure Python (standard library and PyYAML) and has no state: every
function is safe to call from any thread.
"""

from __future__ import annotations

import bisect
import csv
import difflib
import io
import json
import keyword
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator

import yaml

from .._capture.metrics import metric_problem

__all__ = ["Target", "TargetsError", "load_targets", "parse_targets", "FORMATS"]

#: The formats ``parse_targets`` accepts for its ``format`` argument.
FORMATS = ("yaml", "json", "csv")

_EXTENSIONS = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".csv": "csv"}
_ENTRY_KEYS = ("module", "class", "function", "tag", "metrics")
_REQUIRED_KEYS = ("module", "function")
_TOP_LEVEL_KEYS = ("targets", "version")
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


def load_targets(path: str | os.PathLike) -> list[Target]:
    """Reads and checks the targets file at ``path``.

    The format comes from the extension (``.yaml``, ``.yml``, ``.json``, ``.csv``, in any
    case); any other name has its content sniffed. Raises :class:`TargetsError` for a
    file that cannot be used and ``OSError`` for one that cannot be read.
    """
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
    return parse_targets(text, filename=filename)


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


class _Node:
    """A YAML or JSON value with where it starts, so messages can point at it.

    ``kind`` is ``"mapping"`` (``value`` is a list of (key node, value node) pairs),
    ``"list"`` (``value`` is a list of nodes) or ``"scalar"`` (``value`` is the Python
    value). Containers past ``_MAXIMUM_DEPTH`` keep an empty ``value``.
    """

    __slots__ = ("kind", "value", "line", "column", "plain_text")

    def __init__(
        self, kind: str, value: Any, line: int, column: int, plain_text: str | None = None
    ) -> None:
        self.kind = kind
        self.value = value
        self.line = line
        self.column = column
        # A YAML plain (unquoted) scalar's own text, kept for hints such as "quote 'on'"
        # when YAML read a name as a bool or null.
        self.plain_text = plain_text

    def describe(self) -> str:
        if self.kind != "scalar":
            return self.kind
        if self.value is None:
            return "null"
        return type(self.value).__name__


def _compose_yaml(text: str, filename: str) -> _Node | None:
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        return _convert_yaml_node(loader, root, 0, {})
    except yaml.YAMLError as error:
        raise _yaml_syntax_error(error, filename) from None
    finally:
        loader.dispose()


def _convert_yaml_node(
    loader: yaml.SafeLoader, node: yaml.Node, depth: int, converted: dict[int, _Node]
) -> _Node:
    """Converts a composed node; an aliased node is converted once (``converted``)."""
    known = converted.get(id(node))
    if known is not None:
        return known
    result = _convert_new_yaml_node(loader, node, depth, converted)
    converted[id(node)] = result
    return result


def _convert_new_yaml_node(
    loader: yaml.SafeLoader, node: yaml.Node, depth: int, converted: dict[int, _Node]
) -> _Node:
    line = node.start_mark.line + 1
    column = node.start_mark.column + 1
    if isinstance(node, yaml.MappingNode):
        if depth >= _MAXIMUM_DEPTH:
            return _Node("mapping", [], line, column)
        own_pair_count = sum(1 for key, _ in node.value if key.tag != _YAML_MERGE_TAG)
        # Resolves '<<' merge keys: the merged pairs come first in node.value.
        loader.flatten_mapping(node)
        merged_count = len(node.value) - own_pair_count
        pairs = [
            (
                _convert_yaml_node(loader, key, depth + 1, converted),
                _convert_yaml_node(loader, value, depth + 1, converted),
            )
            for key, value in node.value
        ]
        if merged_count:
            pairs = _apply_merge_precedence(pairs[:merged_count], pairs[merged_count:])
        return _Node("mapping", pairs, line, column)
    if isinstance(node, yaml.SequenceNode):
        if depth >= _MAXIMUM_DEPTH:
            return _Node("list", [], line, column)
        items = [
            _convert_yaml_node(loader, item, depth + 1, converted) for item in node.value
        ]
        return _Node("list", items, line, column)
    value = loader.construct_object(node, deep=True)
    plain_text = node.value if node.style is None and not isinstance(value, str) else None
    return _Node("scalar", value, line, column, plain_text)


_YAML_MERGE_TAG = "tag:yaml.org,2002:merge"


def _apply_merge_precedence(merged: list, own: list) -> list:
    """YAML's rule for '<<': a mapping's own keys override merged ones, and among merged
    pairs the later (PyYAML puts the first-listed alias last) wins."""

    def identity(key: _Node):
        return (key.kind, key.value) if key.kind == "scalar" else id(key)

    own_keys = {identity(key) for key, _ in own}
    kept: dict = {}
    for key, value in merged:
        if identity(key) not in own_keys:
            kept[identity(key)] = (key, value)
    return list(kept.values()) + own


def _yaml_syntax_error(error: yaml.YAMLError, filename: str) -> TargetsError:
    problem_mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None)
    context = getattr(error, "context", None)
    message = problem or context or str(error).splitlines()[0]
    if problem and context:
        # PyYAML words these as "<context> ... but <problem>" (e.g. "expected a single
        # document in the stream" / "but found another document"); the problem leads here.
        if message.startswith("but "):
            message = message[len("but "):]
        message += f" ({context}"
        if context_mark is not None and context_mark is not problem_mark:
            message += f" at line {context_mark.line + 1}, column {context_mark.column + 1}"
        message += ")"
    mark = problem_mark or context_mark
    kind = "YAML error" if isinstance(error, yaml.constructor.ConstructorError) else (
        "YAML syntax error"
    )
    if mark is None:
        return TargetsError(f"{kind}: {message}", file=filename)
    return TargetsError(
        f"{kind}: {message}",
        file=filename,
        line=mark.line + 1,
        column=mark.column + 1,
    )


_JSON_WHITESPACE = " \t\n\r"


def _compose_json(text: str, filename: str) -> _Node:
    """Parses JSON into nodes that know their line.

    ``json.loads`` checks the syntax first (its errors carry line and column); the text is
    then walked again, every scalar and key read by ``JSONDecoder.raw_decode`` at its
    offset, so each entry and each field knows where it starts.
    """
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        raise TargetsError(
            f"JSON syntax error: {error.msg}",
            file=filename,
            line=error.lineno,
            column=error.colno,
        ) from None
    except RecursionError:
        raise TargetsError("JSON nested too deeply", file=filename) from None

    decoder = json.JSONDecoder()
    line_starts = [0] + [index + 1 for index, char in enumerate(text) if char == "\n"]

    def position(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(line_starts, offset)
        return line, offset - line_starts[line - 1] + 1

    def skip(offset: int) -> int:
        while offset < len(text) and text[offset] in _JSON_WHITESPACE:
            offset += 1
        return offset

    def parse(offset: int, depth: int) -> tuple[_Node, int]:
        offset = skip(offset)
        line, column = position(offset)
        opening = text[offset]
        if opening not in "[{":
            value, end = decoder.raw_decode(text, offset)
            return _Node("scalar", value, line, column), end
        kind = "mapping" if opening == "{" else "list"
        if depth >= _MAXIMUM_DEPTH:
            _, end = decoder.raw_decode(text, offset)
            return _Node(kind, [], line, column), end
        children: list = []
        offset = skip(offset + 1)
        if text[offset] in "]}":
            return _Node(kind, children, line, column), offset + 1
        while True:
            if kind == "mapping":
                key, offset = parse(offset, depth + 1)
                offset = skip(offset) + 1  # the ':'
                value, offset = parse(offset, depth + 1)
                children.append((key, value))
            else:
                item, offset = parse(offset, depth + 1)
                children.append(item)
            offset = skip(offset)
            if text[offset] == ",":
                offset += 1
                continue
            return _Node(kind, children, line, column), offset + 1

    root, _ = parse(0, 0)
    return root


# --- The tree (YAML and JSON) -----------------------------------------------------------


def _targets_from_tree(root: _Node | None, filename: str) -> list[Target]:
    if root is None:
        raise TargetsError("no targets: the file holds no entries", file=filename)
    if root.kind == "list":
        entries = root
    elif root.kind == "mapping":
        entries = _entries_from_top_level_mapping(root, filename)
    else:
        raise TargetsError(
            "expected a list of entries or a mapping with 'targets', "
            f"got {root.describe()}",
            file=filename,
            line=root.line,
        )
    if not entries.value:
        raise TargetsError("no targets: the list of entries is empty",
                           file=filename, line=entries.line)
    targets: list[Target] = []
    seen: dict[tuple, Target] = {}
    for index, node in enumerate(entries.value, start=1):
        target = _target_from_node(node, index, filename)
        _check_duplicate(target, seen)
        targets.append(target)
    return targets


def _entries_from_top_level_mapping(root: _Node, filename: str) -> _Node:
    fields = _mapping_fields(root, filename, None, _TOP_LEVEL_KEYS, "top-level key")
    if "targets" not in fields:
        raise TargetsError(
            "missing top-level key 'targets'", file=filename, line=root.line
        )
    if "version" in fields:
        version = fields["version"]
        if version.kind != "scalar" or type(version.value) is not int:
            raise TargetsError(
                f"expected an integer, got {version.describe()}",
                file=filename, line=version.line, field="version",
            )
        if version.value != _SUPPORTED_VERSION:
            raise TargetsError(
                f"unsupported version {version.value}; this opsight reads version "
                f"{_SUPPORTED_VERSION}",
                file=filename, line=version.line, field="version",
            )
    entries = fields["targets"]
    if entries.kind == "scalar" and entries.value is None:
        raise TargetsError(
            "no targets: 'targets' is empty", file=filename, line=entries.line
        )
    if entries.kind != "list":
        raise TargetsError(
            f"expected a list of entries, got {entries.describe()}",
            file=filename, line=entries.line, field="targets",
        )
    return entries


def _mapping_fields(
    mapping: _Node,
    filename: str,
    entry: int | None,
    allowed: tuple[str, ...],
    what: str,
) -> dict[str, _Node]:
    """The mapping's values by key, after checking every key is a known string once."""
    fields: dict[str, _Node] = {}
    key_lines: dict[str, int] = {}
    for key, value in mapping.value:
        if key.kind != "scalar" or not isinstance(key.value, str):
            raise TargetsError(
                f"keys must be strings, got {key.describe()}"
                + (f" ({key.value!r})" if key.kind == "scalar" else ""),
                file=filename, line=key.line, entry=entry,
            )
        name = key.value
        if name not in allowed:
            raise TargetsError(
                _unknown_key_message(name, allowed, what),
                file=filename, line=key.line, entry=entry, field=name,
            )
        if name in fields:
            raise TargetsError(
                f"given twice (first at line {key_lines[name]})",
                file=filename, line=key.line, entry=entry, field=name,
            )
        fields[name] = value
        key_lines[name] = key.line
    return fields


def _unknown_key_message(name: str, allowed: tuple[str, ...], what: str) -> str:
    message = f"unknown {what}"
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
    if close:
        message += f" (did you mean '{close[0]}'?)"
    message += "; expected one of " + ", ".join(f"'{key}'" for key in allowed)
    if what == "top-level key" and name in _ENTRY_KEYS:
        message += " (a single entry must still be in a list: '- module: ...')"
    return message


def _target_from_node(node: _Node, entry: int, filename: str) -> Target:
    if node.kind != "mapping":
        raise TargetsError(
            f"expected a mapping with 'module' and 'function', got {node.describe()}",
            file=filename, line=node.line, entry=entry,
        )
    fields = _mapping_fields(node, filename, entry, _ENTRY_KEYS, "key")
    for required in _REQUIRED_KEYS:
        if required not in fields:
            raise TargetsError(
                "missing; every entry needs 'module' and 'function'",
                file=filename, line=node.line, entry=entry, field=required,
            )
    checker = _FieldChecker(filename, entry)
    module = checker.module(fields["module"])
    class_name = checker.class_name(fields.get("class"))
    function = checker.function(fields["function"])
    tag = checker.tag(fields.get("tag"))
    metrics = checker.metrics(fields.get("metrics"))
    return Target(
        module=module, function=function, class_name=class_name, tag=tag,
        metrics=metrics, file=filename, line=node.line, entry=entry,
    )


class _FieldChecker:
    """Checks one tree entry's field nodes; errors point at the field's own line."""

    def __init__(self, filename: str, entry: int) -> None:
        self.filename = filename
        self.entry = entry

    def fail(self, node: _Node, field: str, message: str) -> TargetsError:
        return TargetsError(
            message, file=self.filename, line=node.line, entry=self.entry, field=field
        )

    def string(self, node: _Node, field: str) -> str:
        if node.kind != "scalar" or not isinstance(node.value, str):
            message = f"expected a string, got {node.describe()}"
            if node.plain_text is not None and node.plain_text.isidentifier():
                message += (
                    f" (YAML reads an unquoted {node.plain_text} as {node.describe()}; "
                    f"write '{node.plain_text}')"
                )
            raise self.fail(node, field, message)
        return node.value

    def module(self, node: _Node) -> str:
        value = self.string(node, "module")
        problem = _module_problem(value)
        if problem:
            raise self.fail(node, "module", problem)
        return value

    def class_name(self, node: _Node | None) -> str | None:
        if node is None or (node.kind == "scalar" and node.value in (None, "")):
            return None
        value = self.string(node, "class")
        problem = _class_problem(value)
        if problem:
            raise self.fail(node, "class", problem)
        return value

    def function(self, node: _Node) -> str:
        value = self.string(node, "function")
        problem = _function_problem(value)
        if problem:
            raise self.fail(node, "function", problem)
        return value

    def tag(self, node: _Node | None) -> str | None:
        if node is None or (node.kind == "scalar" and node.value is None):
            return None
        value = self.string(node, "tag")
        problem = _tag_problem(value)
        if problem:
            raise self.fail(node, "tag", problem)
        return value

    def metrics(self, node: _Node | None) -> tuple[str, ...]:
        if node is None or (node.kind == "scalar" and node.value is None):
            return ()
        if node.kind != "list":
            raise self.fail(
                node, "metrics", f"expected a list of strings, got {node.describe()}"
            )
        names: list[str] = []
        for index, item in enumerate(node.value, start=1):
            if item.kind != "scalar" or not isinstance(item.value, str):
                raise self.fail(
                    item, "metrics",
                    f"item {index}: expected a string, got {item.describe()}",
                )
            problem = _metric_problem(item.value, names)
            if problem:
                raise self.fail(item, "metrics", f"item {index}: {problem}")
            names.append(item.value)
        return tuple(names)


# --- CSV --------------------------------------------------------------------------------


def _parse_csv(text: str, filename: str) -> list[Target]:
    """Reads CSV with a header row, or HiQ's headerless 4-column rows.

    Lines whose first non-blank character is ``#`` and blank lines are skipped in both.
    Cells are stripped of surrounding spaces (HiQ writes ``"a", "", "f", "t"``).
    """
    header: dict[str, int] | None = None
    header_line = 0
    first_row = True
    targets: list[Target] = []
    seen: dict[tuple, Target] = {}
    entry = 0
    for line, cells in _csv_rows(text, filename):
        if first_row:
            # The first row that is not a comment decides: a header, or HiQ rows.
            first_row = False
            header = _csv_header(cells, line, filename)
            if header is not None:
                header_line = line
                continue
        entry += 1
        if header is None:
            if len(cells) != len(_HIQ_COLUMNS):
                raise TargetsError(
                    f"expected {len(_HIQ_COLUMNS)} cells (module, class, function, tag) "
                    f"in a row without a header, got {len(cells)}; or start the file "
                    "with a header row such as 'module,class,function,tag'",
                    file=filename, line=line, entry=entry,
                )
            values = dict(zip(_HIQ_COLUMNS, cells))
        else:
            if len(cells) != len(header):
                raise TargetsError(
                    f"expected {len(header)} cells as in the header row "
                    f"(line {header_line}), got {len(cells)}",
                    file=filename, line=line, entry=entry,
                )
            values = {name: cells[column] for name, column in header.items()}
        target = _target_from_cells(values, filename, line, entry)
        _check_duplicate(target, seen)
        targets.append(target)
    if not targets:
        if header is None:
            raise TargetsError("no targets: the file has no rows", file=filename)
        raise TargetsError(
            "no targets: the file has a header row but no rows",
            file=filename, line=header_line,
        )
    return targets


def _csv_rows(text: str, filename: str) -> Iterator[tuple[int, list[str]]]:
    """Yields (first line of the row, stripped cells), skipping comments and blanks."""
    physical_lines = io.StringIO(text, newline="").readlines()
    # strict: an unclosed quote or text between a closing quote and its comma is an
    # error rather than a silently merged cell.
    reader = csv.reader(iter(physical_lines), skipinitialspace=True, strict=True)
    previous_line_number = 0
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise TargetsError(
                f"CSV syntax error: {error}", file=filename, line=reader.line_num
            ) from None
        start = previous_line_number + 1
        previous_line_number = reader.line_num
        if physical_lines[start - 1].lstrip().startswith("#"):
            continue
        stripped = [cell.strip() for cell in cells]
        if not any(stripped):
            continue
        yield start, stripped


def _csv_header(cells: list[str], line: int, filename: str) -> dict[str, int] | None:
    """The column of each name if ``cells`` is a header row, else ``None`` (HiQ rows)."""
    names = [cell.lower() for cell in cells]
    known = [name in _ENTRY_KEYS for name in names]
    if not all(known):
        # A header with a typo still names 'module' or 'function' and has no empty
        # cell; a HiQ row has 4 cells, among them usually the empty class "".
        looks_like_header = ("module" in names or "function" in names) and all(names)
        if not looks_like_header:
            return None
        unknown = names[known.index(False)]
        raise TargetsError(
            _unknown_key_message(unknown, _ENTRY_KEYS, "column in the header row"),
            file=filename, line=line, field=unknown,
        )
    header: dict[str, int] = {}
    for column, name in enumerate(names):
        if name in header:
            raise TargetsError(
                "column named twice in the header row",
                file=filename, line=line, field=name,
            )
        header[name] = column
    for required in _REQUIRED_KEYS:
        if required not in header:
            raise TargetsError(
                "missing column in the header row; 'module' and 'function' are required",
                file=filename, line=line, field=required,
            )
    return header


def _target_from_cells(
    values: dict[str, str], filename: str, line: int, entry: int
) -> Target:
    def fail(field: str, message: str) -> TargetsError:
        return TargetsError(message, file=filename, line=line, entry=entry, field=field)

    for required in _REQUIRED_KEYS:
        if not values.get(required):
            raise fail(required, "missing (the cell is empty)")
    module = values["module"]
    problem = _module_problem(module)
    if problem:
        raise fail("module", problem)
    class_name = values.get("class") or None
    if class_name is not None:
        problem = _class_problem(class_name)
        if problem:
            raise fail("class", problem)
    function = values["function"]
    problem = _function_problem(function)
    if problem:
        raise fail("function", problem)
    tag = values.get("tag") or None
    if tag is not None:
        problem = _tag_problem(tag)
        if problem:
            raise fail("tag", problem)
    metrics: list[str] = []
    for name in re.split(r"[;\s]+", values.get("metrics", "")):
        if not name:
            continue
        problem = _metric_problem(name, metrics)
        if problem:
            raise fail("metrics", problem)
        metrics.append(name)
    return Target(
        module=module, function=function, class_name=class_name, tag=tag,
        metrics=tuple(metrics), file=filename, line=line, entry=entry,
    )


# --- Checks shared by every format -------------------------------------------------------


def _is_pattern(text: str) -> bool:
    return any(char in text for char in _GLOB_CHARACTERS)


def _identifier_problem(part: str, what: str) -> str | None:
    if not part.isidentifier():
        return f"{part!r} is not a Python identifier"
    if keyword.iskeyword(part):
        return f"{part!r} is a Python keyword, not a {what}"
    return None


def _is_identifier_character(char: str) -> bool:
    return ("a" + char).isidentifier()


def _pattern_problem(part: str) -> str | None:
    """Checks one name that may be a glob: identifier characters plus ``*``, ``?``,
    ``[seq]`` and ``[!seq]`` (ranges ``a-z`` allowed inside brackets)."""
    index = 0
    while index < len(part):
        char = part[index]
        if char in "*?" or _is_identifier_character(char):
            index += 1
            continue
        if char == "[":
            close = part.find("]", index + 1)
            if close < 0:
                return f"{part!r} has a '[' without its ']'"
            body = part[index + 1:close]
            if body.startswith("!"):
                body = body[1:]
            if not body:
                return f"{part!r} has an empty '[]' set"
            if not all(c == "-" or _is_identifier_character(c) for c in body):
                return f"{part!r} has a '[...]' set with characters no identifier holds"
            index = close + 1
            continue
        return (
            f"{part!r} is not a Python identifier or glob pattern "
            f"(unexpected {char!r})"
        )
    return None


def _name_or_pattern_problem(part: str, what: str) -> str | None:
    if _is_pattern(part):
        return _pattern_problem(part)
    return _identifier_problem(part, what)


def _module_problem(module: str) -> str | None:
    if _is_pattern(module):
        return f"{module!r}: a module cannot be a glob pattern; name one module"
    for part in module.split("."):
        if not part:
            return f"{module!r} is not a dotted module name (empty part)"
        problem = _identifier_problem(part, "module name")
        if problem:
            return f"{module!r} is not a dotted module name: {problem}"
    return None


def _class_problem(class_name: str) -> str | None:
    for part in class_name.split("."):
        if not part:
            return f"{class_name!r} is not a (dotted) class name (empty part)"
        problem = _name_or_pattern_problem(part, "class name")
        if problem:
            if part == class_name:
                return problem
            return f"{class_name!r} is not a dotted class name: {problem}"
    return None


def _function_problem(function: str) -> str | None:
    if "." in function:
        owner, _, name = function.rpartition(".")
        return (
            f"{function!r} is not a function name; put the class in 'class' "
            f"({owner!r}) and the function in 'function' ({name!r})"
        )
    return _name_or_pattern_problem(function, "function name")


def _tag_problem(tag: str) -> str | None:
    if not tag.strip():
        return "expected a non-empty string"
    if any(not char.isprintable() for char in tag):
        return f"{tag!r} holds a line break or control character"
    return None


def _metric_problem(name: str, earlier: list[str]) -> str | None:
    if not name:
        return "expected a non-empty string"
    if any(char.isspace() or char in ";," for char in name):
        return f"{name!r} is not a metric name (no spaces, ';' or ',')"
    if name in earlier:
        return f"metric {name!r} is listed twice"
    return metric_problem(name)


def _check_duplicate(target: Target, seen: dict[tuple, Target]) -> None:
    key = (target.module, target.class_name, target.function)
    first = seen.get(key)
    if first is None:
        seen[key] = target
        return
    what = f"module {target.module!r}"
    if target.class_name is not None:
        what += f", class {target.class_name!r}"
    what += f", function {target.function!r}"
    raise TargetsError(
        f"duplicate of entry {first.entry} (line {first.line}): {what}",
        file=target.file, line=target.line, entry=target.entry,
    )
