"""The checks of one entry's names: modules, classes and functions as identifiers or
glob patterns, tags, metric names, and duplicate entries."""

from __future__ import annotations

import keyword

from .._capture.metrics import metric_problem
from .model import Target, TargetsError, _GLOB_CHARACTERS, _is_pattern


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
