"""YAML and JSON documents as trees of :class:`_Node` that remember where each value
starts (line, column), so that every message can point at the file's line: PyYAML's
composer for YAML (anchors and merge keys included), a small reader for JSON."""

from __future__ import annotations

import bisect
import json
from typing import Any

import yaml

from .model import TargetsError, _MAXIMUM_DEPTH


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
