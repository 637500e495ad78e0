"""The model tree as text: one line per module (folded blocks once, ``layer.0–11 × 12``),
drawn as a tree, with aligned columns: class, parameters, their bytes, dtypes (and
quantization), frozen or trainable, the input and output shapes of one forward when known,
and p50, p99 and share of the model's time when a profile was given; the totals last.

Marks: ``❄ frozen``, ``● trainable``, ``◐ partly frozen``; with ``ascii=True`` (or when the
output cannot encode them) ``# frozen``, ``+ trainable``, ``~ partly frozen``, the tree in
``|-``/``\\-`` and ``x`` for ``×``."""

from __future__ import annotations

from .tree import ModuleNode

_MARKS = {"frozen": ("❄", "#"), "trainable": ("●", "+"), "partly frozen": ("◐", "~")}


def count_text(value: int) -> str:
    for suffix, size in (("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if value >= size:
            return f"{value / size:.1f} {suffix}"
    return str(value)


def bytes_text(value: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


def _shape_text(shapes: list | None) -> str:
    if not shapes:
        return ""

    def one(shape) -> str:
        if isinstance(shape, dict):
            return "{" + ", ".join(f"{key}: {one(value)}" for key, value in shape.items()) + "}"
        if isinstance(shape, list) and (not shape or isinstance(shape[0], int)):
            return "[" + ",".join(str(size) for size in shape) + "]"
        if isinstance(shape, list):
            return "(" + ", ".join(one(item) for item in shape) + ")"
        return str(shape)

    text = ", ".join(one(shape) for shape in shapes)
    return text if len(text) <= 48 else text[:45] + "..."


def _milliseconds(nanoseconds: float) -> str:
    milliseconds = nanoseconds / 1e6
    return f"{milliseconds:.3f}" if milliseconds < 10 else f"{milliseconds:.1f}"


def render_text(root: ModuleNode, *, depth: int | None = None, ascii: bool = False) -> str:
    has_shapes = any(node.input_shapes is not None for node in _nodes(root, depth))
    has_latency = root.latency is not None
    headers = ["module", "class", "params", "size", "dtype", "state"]
    if has_shapes:
        headers.append("in -> out" if ascii else "in → out")
    if has_latency:
        headers += ["p50 ms", "p99 ms", "share"]
    rows: list[list[str]] = []

    def add(node: ModuleNode, lead: str, below: str, level: int) -> None:
        """``lead``: this line's tree drawing; ``below``: what the children's lines start with."""
        times = " x " if ascii else " × "
        label = node.name if not ascii else node.name.replace("–", "-")
        if node.repeat > 1:
            label += f"{times}{node.repeat}"
        mark = _MARKS.get(node.state, ("", ""))[1 if ascii else 0]
        dtype = ",".join(node.dtypes)
        if node.quantization:  # "qint8 (dynamic)": the style, the dtype is listed already
            kinds, _, style = node.quantization.partition(" ")
            dtype = f"{dtype or kinds} {style}".strip()
        row = [lead + label, node.class_name,
               count_text(node.parameters) if node.parameters else "-",
               bytes_text(node.parameter_bytes + node.buffer_bytes)
               if node.parameters or node.buffers else "-",
               dtype or "-", f"{mark} {node.state}".strip() if node.state else "-"]
        if has_shapes:
            arrow = " -> " if ascii else " → "
            row.append(_shape_text(node.input_shapes) + arrow + _shape_text(node.output_shapes)
                       if node.input_shapes is not None else "")
        if has_latency:
            if node.latency is not None:
                row += [_milliseconds(node.latency.p50_ns), _milliseconds(node.latency.p99_ns),
                        f"{node.latency.share * 100:.1f}%"]
            else:
                row += ["", "", ""]
        rows.append(row)
        if depth is not None and level >= depth:
            return
        for index, child in enumerate(node.children):
            last = index == len(node.children) - 1
            if ascii:
                connector, continuation = ("\\- ", "   ") if last else ("|- ", "|  ")
            else:
                connector, continuation = ("└─ ", "   ") if last else ("├─ ", "│  ")
            add(child, below + connector, below + continuation, level + 1)

    add(root, "", "", 0)
    widths = [max(len(header), *(len(row[column]) for row in rows))
              for column, header in enumerate(headers)]
    numeric = {"params", "size", "p50 ms", "p99 ms", "share"}

    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(width) if headers[column] in numeric else cell.ljust(width)
                         for column, (cell, width) in enumerate(zip(cells, widths))).rstrip()

    out = [line(headers), line(["-" * width for width in widths])]
    out += [line(row) for row in rows]
    frozen = root.parameters - root.trainable_parameters
    out.append("")
    out.append(f"total: {root.parameters:,} parameters ({bytes_text(root.parameter_bytes)}), "
               f"{root.trainable_parameters:,} trainable, {frozen:,} frozen; "
               f"{root.buffers:,} buffer values ({bytes_text(root.buffer_bytes)})")
    if has_latency and root.latency is not None:
        out.append(f"profile: {root.latency.calls} call{'' if root.latency.calls == 1 else 's'}"
                   f" of {root.class_name}, p50 {_milliseconds(root.latency.p50_ns)} ms, "
                   f"p99 {_milliseconds(root.latency.p99_ns)} ms")
    return "\n".join(out) + "\n"


def _nodes(root: ModuleNode, depth: int | None, level: int = 0):
    yield root
    if depth is not None and level >= depth:
        return
    for child in root.children:
        yield from _nodes(child, depth, level + 1)


def prune(node: ModuleNode, depth: int | None, level: int = 0) -> dict:
    """``node.to_dict()`` cut below ``depth`` (the counts still cover the whole subtree)."""
    data = node.to_dict()
    if depth is not None:
        def cut(item: dict, at: int) -> None:
            if at >= depth:
                item["children"] = []
            for child in item["children"]:
                cut(child, at + 1)
        cut(data, level)
    return data
