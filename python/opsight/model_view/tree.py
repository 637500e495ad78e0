"""A model's structure as data: :class:`ModuleNode` per ``nn.Module`` (its parameters and
buffers, counted and sized, their dtypes and quantization, frozen or trainable, the shapes
of one forward's inputs and outputs, latencies from a profile), with runs of identical
sibling blocks folded into one node (``encoder.layer.0–11 × 12``). A ``ModuleList`` (a
container, never called) is not a node: its items stand in its place, named ``layer.0``.

Folding: two modules are identical when their class, their own parameters and buffers
(names, shapes, dtypes, requires_grad) and their children are, recursively
(:func:`signature`). Among a module's children whose names are consecutive integers (a
``ModuleList`` or ``Sequential``), each run of two or more identical ones becomes one node
showing the first, with ``repeat`` set and its counts multiplied; latencies of a folded node
pool every member's calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Latency:
    """A module's calls in a profile: count, p50/p99 of one call, total, and its share of
    the outermost module's total (0..1). Times in nanoseconds."""
    calls: int
    p50_ns: float
    p99_ns: float
    total_ns: int
    share: float


@dataclass
class ModuleNode:
    """One module, or ``repeat`` identical sibling modules folded (``first_index`` ...
    ``first_index + repeat - 1``). Counts are this node's subtree, all members included."""
    path: str                     # "encoder.layer.0" ("" for the root)
    name: str                     # the label: "layer.0–11" / "embeddings" / the root class
    class_name: str
    parameters: int = 0
    parameter_bytes: int = 0
    trainable_parameters: int = 0
    buffers: int = 0
    buffer_bytes: int = 0
    dtypes: list[str] = field(default_factory=list)
    quantization: str = ""        # "qint8 (dynamic)", ...: empty when not quantized
    repeat: int = 1
    input_shapes: list[Any] | None = None
    output_shapes: list[Any] | None = None
    latency: Latency | None = None
    children: list["ModuleNode"] = field(default_factory=list)
    member_paths: list[str] = field(default_factory=list)  # a folded node's modules

    @property
    def state(self) -> str:
        """``frozen`` (no parameter needs a gradient), ``trainable`` (all do), ``partly
        frozen``, or ``""`` without parameters."""
        if self.parameters == 0:
            return ""
        if self.trainable_parameters == 0:
            return "frozen"
        if self.trainable_parameters == self.parameters:
            return "trainable"
        return "partly frozen"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path, "name": self.name, "class": self.class_name,
            "repeat": self.repeat, "parameters": self.parameters,
            "parameter_bytes": self.parameter_bytes,
            "trainable_parameters": self.trainable_parameters, "state": self.state,
            "buffers": self.buffers, "buffer_bytes": self.buffer_bytes, "dtypes": self.dtypes,
            "quantization": self.quantization or None,
        }
        if self.input_shapes is not None:
            out["input_shapes"] = self.input_shapes
            out["output_shapes"] = self.output_shapes
        if self.latency is not None:
            out["latency"] = {"calls": self.latency.calls, "p50_ms": self.latency.p50_ns / 1e6,
                              "p99_ms": self.latency.p99_ns / 1e6,
                              "total_ms": self.latency.total_ns / 1e6,
                              "share": self.latency.share}
        if self.member_paths:
            out["members"] = self.member_paths
        out["children"] = [child.to_dict() for child in self.children]
        return out


def _tensor_signature(name: str, tensor: Any) -> tuple:
    return (name, tuple(tensor.shape), str(tensor.dtype), bool(tensor.requires_grad))


def signature(module: Any, memo: dict[int, tuple] | None = None) -> tuple:
    """What makes two modules identical for folding (see the module's documentation)."""
    memo = {} if memo is None else memo
    key = id(module)
    if key not in memo:
        memo[key] = (
            type(module).__qualname__,
            tuple(_tensor_signature(n, p) for n, p in module.named_parameters(recurse=False)),
            tuple(_tensor_signature(n, b) for n, b in module.named_buffers(recurse=False)
                  if b is not None),
            tuple((n, signature(child, memo)) for n, child in module.named_children()),
        )
    return memo[key]


def _packed_tensors(module: Any) -> list[Any]:
    """The weight and bias a quantized module keeps packed (``LinearPackedParams``), which
    ``named_parameters`` does not list."""
    unpack = getattr(module, "_weight_bias", None)
    if not callable(unpack) or not type(module).__name__.endswith("PackedParams"):
        return []
    try:
        return [tensor for tensor in unpack() if tensor is not None]
    except Exception:  # noqa: BLE001 - a packing this torch cannot unpack: not counted
        return []


def _quantization(module: Any, tensors: list[Any]) -> str:
    """``qint8 (dynamic)``, ``quint8 (static)``, ``qint8`` (packed weights), or ``""``."""
    kinds = sorted({str(tensor.dtype).removeprefix("torch.") for tensor in tensors
                    if getattr(tensor, "is_quantized", False)})
    owner = type(module).__module__
    if "quantized" not in owner or type(module).__name__.endswith("PackedParams"):
        return "/".join(kinds)
    style = "dynamic" if ".dynamic" in owner else "static"
    return f"{'/'.join(kinds) or 'quantized'} ({style})"


def _own_counts(module: Any) -> dict[str, Any]:
    parameters = [p for _, p in module.named_parameters(recurse=False)]
    packed = _packed_tensors(module)
    buffers = [b for _, b in module.named_buffers(recurse=False) if b is not None]
    weights = parameters + packed
    return {
        "parameters": sum(p.numel() for p in weights),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in weights),
        "trainable_parameters": sum(p.numel() for p in parameters if p.requires_grad),
        "buffers": sum(b.numel() for b in buffers),
        "buffer_bytes": sum(b.numel() * b.element_size() for b in buffers),
        "dtypes": {str(t.dtype).removeprefix("torch.") for t in weights + buffers},
        "quantization": _quantization(module, weights + buffers),
    }


def _build(module: Any, path: str, name: str, memo: dict[int, tuple]) -> ModuleNode:
    own = _own_counts(module)
    node = ModuleNode(path=path, name=name, class_name=type(module).__name__,
                      parameters=own["parameters"], parameter_bytes=own["parameter_bytes"],
                      trainable_parameters=own["trainable_parameters"], buffers=own["buffers"],
                      buffer_bytes=own["buffer_bytes"], quantization=own["quantization"])
    dtypes = set(own["dtypes"])
    children = list(module.named_children())
    index = 0
    while index < len(children):
        child_name, child = children[index]
        end = index + 1
        if child_name.isdigit():
            while (end < len(children) and children[end][0].isdigit()
                   and int(children[end][0]) == int(children[end - 1][0]) + 1
                   and signature(children[end][1], memo) == signature(child, memo)):
                end += 1
        child_path = f"{path}.{child_name}" if path else child_name
        built = _build(child, child_path, child_name, memo)
        if end - index > 1:
            last = children[end - 1][0]
            built.repeat = end - index
            built.name = f"{child_name}–{last}"
            built.member_paths = [f"{path}.{n}" if path else n for n, _ in children[index:end]]
            _multiply(built, built.repeat)
        if built.class_name == "ModuleList" and type(child).__name__ == "ModuleList":
            # A ModuleList is a container, never called: its items stand in its place,
            # named from it ("layer.0–11 × 12" under "encoder", not "layer" > "0–11").
            for item in built.children:
                item.name = f"{child_name}.{item.name}"
                node.children.append(item)
        else:
            node.children.append(built)
        index = end
    for child in node.children:
        node.parameters += child.parameters
        node.parameter_bytes += child.parameter_bytes
        node.trainable_parameters += child.trainable_parameters
        node.buffers += child.buffers
        node.buffer_bytes += child.buffer_bytes
        dtypes.update(child.dtypes)
        if child.quantization and not node.quantization:
            node.quantization = child.quantization
        elif child.quantization and node.quantization.startswith("quantized ("):
            # A quantized module whose weights are packed in a child: the child's dtype.
            node.quantization = (child.quantization.partition(" ")[0]
                                 + node.quantization.removeprefix("quantized"))
    node.dtypes = sorted(dtypes)
    return node


def _multiply(node: ModuleNode, times: int) -> None:
    """A folded node's counts cover every member (the members are identical)."""
    node.parameters *= times
    node.parameter_bytes *= times
    node.trainable_parameters *= times
    node.buffers *= times
    node.buffer_bytes *= times


def build_tree(model: Any) -> ModuleNode:
    """The folded tree of ``model`` (an ``nn.Module``)."""
    return _build(model, "", type(model).__name__, {})


def walk(node: ModuleNode):
    yield node
    for child in node.children:
        yield from walk(child)
