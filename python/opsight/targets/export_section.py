"""A targets file's ``export:`` section: where the run's spans and metrics go, the same
targets as ``opsight run --export`` and ``OPSIGHT_EXPORT`` (docs/export.md).

Two spellings, checked with the file's line numbers::

    export:                                  export:
      - otlp=http://127.0.0.1:4318             otlp: http://127.0.0.1:4318
      - prometheus=:9464                       prometheus: ":9464"
      - zipkin                                 zipkin:            # the default URL
"""

from __future__ import annotations

from .documents import _Node
from .model import EXPORT_KINDS, TargetsError


def _export_targets_from_tree(root: _Node | None, filename: str) -> list[str]:
    """The targets of the top-level ``export`` key (``[]`` when there is none)."""
    if root is None or root.kind != "mapping":
        return []
    section = next((value for key, value in root.value
                    if key.kind == "scalar" and key.value == "export"), None)
    if section is None or (section.kind == "scalar" and section.value is None):
        return []
    if section.kind == "list":
        return [_target_of_item(item, filename) for item in section.value]
    if section.kind == "mapping":
        return [_target_of_pair(key, value, filename) for key, value in section.value]
    raise TargetsError(
        f"expected a list of targets (- otlp=http://...) or a mapping (otlp: http://...), "
        f"got {section.describe()}", file=filename, line=section.line, field="export")


def _target_of_item(item: _Node, filename: str) -> str:
    if item.kind != "scalar" or not isinstance(item.value, str) or not item.value.strip():
        raise TargetsError(f"expected a target such as otlp=http://127.0.0.1:4318, got "
                           f"{item.describe()}", file=filename, line=item.line, field="export")
    text = item.value.strip()
    kind = text.split("=", 1)[0].split("?", 1)[0]
    _check_kind(kind, item, filename)
    return text


def _target_of_pair(key: _Node, value: _Node, filename: str) -> str:
    if key.kind != "scalar" or not isinstance(key.value, str):
        raise TargetsError(f"keys must be export kinds, got {key.describe()}",
                           file=filename, line=key.line, field="export")
    _check_kind(key.value, key, filename)
    if value.kind == "scalar" and value.value is None:
        return key.value
    if value.kind != "scalar" or not isinstance(value.value, str) or not value.value.strip():
        raise TargetsError(f"expected a URL (or nothing, for the default), got "
                           f"{value.describe()}", file=filename, line=value.line,
                           field=f"export.{key.value}")
    return f"{key.value}={value.value.strip()}"


def _check_kind(kind: str, node: _Node, filename: str) -> None:
    if kind not in EXPORT_KINDS:
        raise TargetsError(f"unknown export kind {kind!r}; expected one of "
                           + ", ".join(EXPORT_KINDS), file=filename, line=node.line,
                           field="export")
