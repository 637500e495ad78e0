"""The C++ ``opsight`` command installed inside the package (``opsight/bin/opsight``):
where it is, and replacing this process with it. The Python CLI hands every command it does
not own to it; ``opsight demo --quickstart`` runs its C++ example through it."""

from __future__ import annotations

import os
import sys


def core_command_path() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "opsight")


def exec_core(arguments: list[str]) -> int:
    """Replaces this process with ``opsight ARGUMENTS`` (the C++ command); returns 1 with a
    message when the command is missing."""
    path = core_command_path()
    if not os.access(path, os.X_OK):
        print(f"opsight: the core command is missing ({path}); reinstall the package",
              file=sys.stderr)
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, ["opsight", *arguments])
    return 1  # not reached
