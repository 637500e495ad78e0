"""Reading a zoo file (``opsight explain --zoo zoo.yaml``): the models to explain, each a
TARGET with a name, a family and a time limit::

    timeout: 300            # seconds per model (default 600)
    models:
      - name: bert-tiny
        family: encoder
        target: models.py:bert      # file.py:factory (relative to this file) or module:factory
        timeout: 120                # this model's own limit

A mistake is a :class:`ZooError` naming the file, the line and the field."""

from __future__ import annotations

import os
from typing import Any

from .runner import ModelSpec

DEFAULT_TIMEOUT_S = 600.0
_MODEL_KEYS = ("name", "family", "target", "timeout")
_TOP_KEYS = ("timeout", "models")


class ZooError(ValueError):
    """A zoo file that cannot be used; the message says where and why."""


def _where(path: str, node: Any) -> str:
    return f"{path}:{node.start_mark.line + 1}"


def _scalar(path: str, node: Any, field: str) -> str:
    import yaml

    if not isinstance(node, yaml.ScalarNode) or not str(node.value).strip():
        raise ZooError(f"{_where(path, node)}: {field}: expected a non-empty text")
    return str(node.value).strip()


def _timeout(path: str, node: Any, field: str) -> float:
    text = _scalar(path, node, field)
    try:
        value = float(text)
    except ValueError:
        raise ZooError(f"{_where(path, node)}: {field}: expected seconds, got {text!r}") from None
    if not value > 0:
        raise ZooError(f"{_where(path, node)}: {field}: must be > 0, got {text}")
    return value


def _mapping(path: str, node: Any, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise ZooError(f"{_where(path, node)}: {what}: expected a mapping "
                       f"({', '.join(allowed)})")
    fields: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        if key not in allowed:
            raise ZooError(f"{_where(path, key_node)}: {what}: unknown field {key!r} "
                           f"(expected {', '.join(allowed)})")
        if key in fields:
            raise ZooError(f"{_where(path, key_node)}: {what}: {key!r} given twice")
        fields[key] = value_node
    return fields


def _resolve_target(target: str, directory: str) -> str:
    """A ``file.py:factory`` relative to the zoo file's directory becomes absolute."""
    where, colon, attribute = target.rpartition(":")
    if colon and (where.endswith(".py") or "/" in where) and not os.path.isabs(where):
        return os.path.join(directory, where) + ":" + attribute
    return target


def load_zoo(path: str) -> list[ModelSpec]:
    """The models of the zoo file at ``path``; raises :class:`ZooError`."""
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        raise ZooError(f"{path}: cannot read the zoo file ({error.strerror})") from None
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ZooError(f"{path}{line}: not valid YAML: {problem}") from None
    if root is None:
        raise ZooError(f"{path}: empty zoo file: expected 'models:' with a list of models")
    top = _mapping(path, root, _TOP_KEYS, "zoo")
    default_timeout = (_timeout(path, top["timeout"], "timeout") if "timeout" in top
                       else DEFAULT_TIMEOUT_S)
    if "models" not in top:
        raise ZooError(f"{_where(path, root)}: zoo: missing 'models' (a list of models)")
    models_node = top["models"]
    if not isinstance(models_node, yaml.SequenceNode) or not models_node.value:
        raise ZooError(f"{_where(path, models_node)}: models: expected a non-empty list")
    directory = os.path.dirname(os.path.abspath(path))
    models: list[ModelSpec] = []
    seen: dict[str, str] = {}
    for index, node in enumerate(models_node.value):
        what = f"models[{index}]"
        fields = _mapping(path, node, _MODEL_KEYS, what)
        if "target" not in fields:
            raise ZooError(f"{_where(path, node)}: {what}: missing 'target' "
                           "(module:factory or file.py:factory)")
        target = _scalar(path, fields["target"], f"{what}.target")
        if ":" not in target:
            raise ZooError(f"{_where(path, fields['target'])}: {what}.target: {target!r}: "
                           "expected module:factory or file.py:factory")
        name = (_scalar(path, fields["name"], f"{what}.name") if "name" in fields
                else target.rpartition(":")[2])
        if name in seen:
            raise ZooError(f"{_where(path, node)}: {what}: the name {name!r} is already used "
                           f"at {seen[name]}")
        seen[name] = _where(path, node)
        family = _scalar(path, fields["family"], f"{what}.family") if "family" in fields else ""
        timeout = (_timeout(path, fields["timeout"], f"{what}.timeout") if "timeout" in fields
                   else default_timeout)
        models.append(ModelSpec(name=name, target=_resolve_target(target, directory),
                                family=family, timeout_s=timeout))
    return models
