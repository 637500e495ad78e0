"""Saving traces as runs of the run store (docs/store.md), for every part of the package
that records: ``opsight.profile(store=True)``, ``opsight run``, ``opsight bench`` and the
demo. Saving never fails the caller: a problem is a warning on stderr."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from ._core_command import core_command_path

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


def save_run(files: list[str], *, name: str | None = None, tags=(), command: str | None = None,
             cwd: str | None = None, store: str | os.PathLike | None = None,
             prefix: str = "opsight", timeout: float = 300) -> dict | None:
    """See :func:`_save_run`; never raises (saving must not change a program's outcome)."""
    try:
        return _save_run(files, name=name, tags=tags, command=command, cwd=cwd, store=store,
                         prefix=prefix, timeout=timeout)
    except (Exception, KeyboardInterrupt) as error:  # noqa: BLE001 - a warning, never a failure
        print(f"{prefix}: warning: the run was not saved in the run store: "
              f"{type(error).__name__}: {error}", file=sys.stderr)
        return None


def _save_run(files: list[str], *, name: str | None, tags, command: str | None,
              cwd: str | None, store: str | os.PathLike | None, prefix: str,
              timeout: float) -> dict | None:
    """Stores trace files (merged) as one run with ``opsight save``; returns the saved run
    (``id``, ``uuid``, ``store``... as ``opsight save --format json`` prints it), or None
    after printing a warning on stderr: saving never fails the caller.

    ``tags``: ``"key=value"`` strings or a mapping."""
    if isinstance(tags, dict):
        tags = [f"{key}={value}" for key, value in tags.items()]
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:  # the program removed its working directory
            cwd = ""
    arguments = [core_command_path(), "save", *files, "--format", "json"]
    if cwd:
        arguments += ["--cwd", cwd]
    if name:
        arguments += ["--name", name]
    if command is not None:
        arguments += ["--command", command]
    if store is not None:
        arguments += ["--store", os.fspath(store)]
    for tag in tags:
        arguments += ["--tag", str(tag)]
    for package, version in package_versions():
        arguments += ["--package", f"{package}={version}"]
    try:
        completed = subprocess.run(arguments, capture_output=True, text=True, errors="replace",
                                   timeout=timeout)
    except (OSError, subprocess.SubprocessError) as error:
        print(f"{prefix}: warning: the run was not saved in the run store: {error}",
              file=sys.stderr)
        return None
    # Errors are summed up below; damaged inputs were already reported by the caller.
    sys.stderr.write("".join(line + "\n" for line in completed.stderr.splitlines()
                             if not line.startswith("opsight: error:")
                             and not line.endswith("(saving what was read before it)")))
    saved = None
    if completed.returncode in (0, 2):
        try:
            saved = json.loads(completed.stdout)
        except ValueError:
            saved = None
    if saved is None:
        errors = [line.removeprefix("opsight: error: ")
                  for line in completed.stderr.splitlines() if line.startswith("opsight: error:")]
        reason = "; ".join(errors) or f"opsight save exited with status {completed.returncode}"
        print(f"{prefix}: warning: the run was not saved in the run store: {reason}",
              file=sys.stderr)
        return None
    where = saved["store"]
    home = os.path.expanduser("~")
    if where.startswith(home + os.sep):
        where = "~" + where[len(home):]
    print(f"{prefix}: saved as run {saved['id']} in {where} (opsight show {saved['id']})",
          file=sys.stderr)
    return saved


