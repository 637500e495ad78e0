"""From a document tree to :class:`Target` s: the top level (a list, or ``{version,
targets}``), each entry's fields checked with their line, unknown keys with a "did you
mean"."""

from __future__ import annotations

import difflib

from .documents import _Node
from .model import (
    Target, TargetsError, _ENTRY_KEYS, _REQUIRED_KEYS, _SUPPORTED_VERSION, _TOP_LEVEL_KEYS)
from .names import (
    _check_duplicate, _class_problem, _function_problem, _metric_problem, _module_problem,
    _tag_problem)


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
