"""Remote back-end specs: ``HARDWARE/BACKEND`` (octoml-profile's ``r6i.large/onnxrt-cpu``).

``HARDWARE`` is a hardware label: the name of a Ray custom resource that a team gives every
node of that kind (``ray start --resources '{"r6i.large": 1}'``, docs/remote.md).
``BACKEND`` is one of the model tools' back-end names (:data:`opsight.models.BACKENDS` and
their aliases). A spec is written back as the user gave it, so tables show their words."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..models import BACKEND_ALIASES, BACKENDS, canonical_backend


class RemoteError(Exception):
    """A cluster, spec, price table or worker that cannot be used; the message names what is
    wrong and what to do (the commands print it and exit 1, or 64 for bad usage)."""


class SpecError(RemoteError, ValueError):
    """A malformed ``HARDWARE/BACKEND`` spec or an unknown back-end (bad usage)."""


#: A hardware label: what Ray accepts as a custom resource name and a shell keeps whole.
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+\-]*$")


@dataclass(frozen=True)
class BackendSpec:
    """``hardware`` (a Ray custom resource naming a kind of node) and ``backend`` (as given;
    :attr:`canonical` is its name in :data:`opsight.models.BACKENDS`)."""
    hardware: str
    backend: str

    @property
    def canonical(self) -> str:
        return canonical_backend(self.backend)

    def __str__(self) -> str:
        return f"{self.hardware}/{self.backend}"


def parse_spec(text: str, default_backend: str | None = None,
               allowed: tuple[str, ...] = BACKENDS) -> BackendSpec:
    """``"nodeA/ort-cpu"`` to ``BackendSpec("nodeA", "ort-cpu")``; ``"nodeA"`` alone takes
    ``default_backend`` (``opsight bench --on nodeA --backend ort-cpu``). Raises
    :class:`SpecError` naming the part at fault."""
    if not isinstance(text, str):
        raise SpecError(f"a remote back-end is a 'HARDWARE/BACKEND' string, got {text!r}")
    hardware, slash, backend = text.strip().partition("/")
    if not slash:
        if default_backend is None:
            raise SpecError(f"{text!r}: expected HARDWARE/BACKEND, e.g. cpu-large/ort-cpu")
        backend = default_backend
    if not hardware or not _LABEL.match(hardware):
        raise SpecError(f"{text!r}: the hardware label {hardware!r} must be a Ray custom "
                        "resource name (letters, digits, '.', '_', '-', ':', '+')")
    if not backend or "/" in backend:
        raise SpecError(f"{text!r}: expected HARDWARE/BACKEND, e.g. cpu-large/ort-cpu")
    if canonical_backend(backend) not in allowed:
        known = ", ".join(allowed)
        aliases = ", ".join(f"{alias}={name}" for alias, name in BACKEND_ALIASES.items()
                            if name in allowed)
        raise SpecError(f"{text!r}: unknown back-end {backend!r} (one of {known}; "
                        f"aliases {aliases})")
    return BackendSpec(hardware, backend)


def parse_specs(items, default_backend: str | None = None,
                allowed: tuple[str, ...] = BACKENDS) -> list[BackendSpec]:
    """A list of specs (or one comma-separated string); a spec given twice is an error."""
    if isinstance(items, str):
        items = [items]
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            texts.extend(part.strip() for part in item.split(",") if part.strip())
        else:
            texts.append(item)
    specs = [parse_spec(text, default_backend, allowed) for text in texts]
    if not specs:
        raise SpecError("no remote back-end given: expected HARDWARE/BACKEND, e.g. "
                        "cpu-large/ort-cpu")
    seen: dict[tuple[str, str], BackendSpec] = {}
    for spec in specs:
        key = (spec.hardware, spec.canonical)
        if key in seen:
            raise SpecError(f"{spec} is given twice ({seen[key]} names the same back-end on "
                            "the same hardware)")
        seen[key] = spec
    return specs
