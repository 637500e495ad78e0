"""CSV targets: a header row naming the columns, or HiQ's own headerless rows
``"module", "class", "function", "tag"`` with ``#`` comments."""

from __future__ import annotations

import csv
import io
import re
from typing import Iterator

from .entries import _unknown_key_message
from .model import Target, TargetsError, _ENTRY_KEYS, _HIQ_COLUMNS, _REQUIRED_KEYS
from .names import (
    _check_duplicate, _class_problem, _function_problem, _metric_problem, _module_problem,
    _tag_problem)


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
