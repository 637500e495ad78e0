"""Saving traces as runs of the run store (docs/store.md), for every part of the package
that records: ``opsight.profile(store=True)``, ``opsight run``, ``opsight bench`` and the
demo. Saving never fails the caller: a problem is a warning on stderr."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import opsight._native as _native

_KNOWN_PACKAGES = (("torch", ("torch",)), ("onnxruntime", ("onnxruntime", "onnxruntime-gpu")),
                   ("numpy", ("numpy",)), ("transformers", ("transformers",)))


def package_versions() -> list[tuple[str, str]]:
    """Versions of Python, opsight and the known ML packages that are installed.

    A package already imported answers with its ``__version__``; any other is looked up in
    its installed metadata (``importlib.metadata``), so that nothing heavy is imported."""
    from importlib import metadata

    versions = [("python", platform.python_version())]
    try:
        versions.append(("opsight", metadata.version("opsight")))
    except metadata.PackageNotFoundError:
        pass
    for name, distributions in _KNOWN_PACKAGES:
        module = sys.modules.get(name)
        version = getattr(module, "__version__", None) if module is not None else None
        for distribution in distributions:
            if version:
                break
            try:
                version = metadata.version(distribution)
            except metadata.PackageNotFoundError:
                continue
        if version:
            versions.append((name, str(version)))
    return versions


def save_run(files: list[str] | None = None, *, trace: Any = None, name: str | None = None,
             tags: Any = (), command: str | None = None, cwd: str | None = None,
             store: str | os.PathLike | None = None, prefix: str = "opsight",
             streaming: bool = False) -> dict | None:
    """Saves one run in the run store: trace ``files`` (one run's processes, merged) or a
    ``trace`` in memory (an ``opsight._native.Trace``); with ``streaming``, ``files`` is
    one native file saved as it is, never read into memory (a run merged streaming),
    labelled with ``name``, ``tags``
    (``"key=value"`` strings or a mapping) and ``command``, with the host's metadata and
    :func:`package_versions`. Returns the saved run (``id``, ``uuid``, ``name``, ``tags``,
    ``slices``, ``store``...) and says where on stderr; returns None after a warning on
    stderr when it could not save: saving never fails the caller."""
    try:
        return _save_run(files, trace, name=name, tags=tags, command=command, cwd=cwd,
                         store=store, prefix=prefix, streaming=streaming)
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - a warning, never a failure
        print(f"{prefix}: warning: the run was not saved in the run store: "
              f"{type(error).__name__}: {error}", file=sys.stderr)
        return None


def _tag_pairs(tags: Any) -> list[tuple[str, str]]:
    if isinstance(tags, dict):
        return [(str(key), str(value)) for key, value in tags.items()]
    pairs = []
    for tag in tags:
        key, _, value = str(tag).partition("=")
        if not key:
            raise ValueError(f"tag {tag!r}: expected KEY=VALUE or KEY")
        pairs.append((key, value))
    return pairs


def _save_run(files: list[str] | None, trace: Any, *, name: str | None, tags: Any,
              command: str | None, cwd: str | None, store: str | os.PathLike | None,
              prefix: str, streaming: bool = False) -> dict | None:
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:  # the program removed its working directory
            cwd = ""
    options = dict(store_path=os.fspath(store) if store is not None else "", name=name or "",
                   command=command or "", working_directory=cwd, tags=_tag_pairs(tags),
                   versions=package_versions())
    if trace is not None:
        outcome = _native.save_trace(trace, **options)
    else:
        outcome = _native.save_trace_files(list(files or ()), streaming=streaming, **options)
    for note in outcome["notes"]:
        print(f"{prefix}: {note}", file=sys.stderr)
    saved = outcome["run"]
    if saved is None:
        print(f"{prefix}: warning: the run was not saved in the run store: {outcome['error']}",
              file=sys.stderr)
        return None
    where = saved["store"]
    home = os.path.expanduser("~")
    if where.startswith(home + os.sep):
        where = "~" + where[len(home):]
    print(f"{prefix}: saved as run {saved['id']} in {where} (opsight show {saved['id']})",
          file=sys.stderr)
    return saved
