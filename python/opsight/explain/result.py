"""What ``opsight explain`` finds for one model: :class:`ModelExplain` (graphs, breaks, compile
cost, whether the compiled outputs match eager) and its :class:`BreakSite` rows (one per
distinct reason at one source line, counted), as plain data that round-trips through JSON:
the JSON is what a child process hands back, what a baseline file holds and what the run
store keeps in the model's span."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: A model's outcome: explained, or why not.
STATUS_OK = "ok"
STATUS_FAILED = "failed"      # the factory, the model or dynamo raised
STATUS_TIMEOUT = "timeout"    # the time limit ran out (zoo)
STATUS_CRASHED = "crashed"    # the process died (a signal, a hard exit) (zoo)


@dataclass
class BreakSite:
    """One graph-break reason at one place of the user's code, with how often dynamo broke
    there. ``reason`` is the first line of dynamo's reason with object addresses removed,
    so that the same cause groups across runs; ``file``/``line``/``function`` are the
    innermost frame of the user's code (not torch's), ``stack`` the user frames outside-in
    ("file:line in function")."""
    reason: str
    file: str
    line: int
    function: str
    count: int = 1
    detail: str = ""
    stack: list[str] = field(default_factory=list)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "(unknown)"

    def key(self) -> tuple[str, str, str]:
        """What identifies a break across commits: the reason and the function it is in, by
        file name (not line: an unrelated edit above it moves the line)."""
        return (self.reason, _base_name(self.file), self.function)


def _base_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


@dataclass
class ModelExplain:
    """One model's explain. Times in seconds, memory in bytes; ``None`` where not measured
    (a model that failed before that step)."""
    model: str
    family: str = ""
    target: str = ""
    status: str = STATUS_OK
    error: str = ""
    graphs: int | None = None
    graph_breaks: int | None = None
    ops: int | None = None
    ops_per_graph: list[int] = field(default_factory=list)
    breaks: list[BreakSite] = field(default_factory=list)
    backend: str = ""
    explain_seconds: float | None = None     # dynamo's capture (torch._dynamo.explain)
    compile_seconds: float | None = None     # the first call of torch.compile(backend)
    compile_peak_bytes: int | None = None    # peak resident memory above the start, both steps
    outputs_match: bool | None = None
    max_abs_difference: float | None = None
    wall_seconds: float | None = None        # the whole model, import and factory included
    parent_seconds: float | None = None      # as the zoo's parent saw it (process included)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "ModelExplain":
        known = {name for name in ModelExplain.__dataclass_fields__}
        values = {key: value for key, value in data.items() if key in known}
        values["breaks"] = [BreakSite(**{key: value for key, value in site.items()
                                         if key in BreakSite.__dataclass_fields__})
                            for site in data.get("breaks", [])]
        return ModelExplain(**values)
