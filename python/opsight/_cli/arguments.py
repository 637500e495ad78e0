"""argparse with opsight's exit statuses: bad usage (an unknown option, a missing or invalid
value) exits 64 (``exit_codes.USAGE_ERROR``), not argparse's 2, which opsight's commands use
for damaged input."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from ..exit_codes import USAGE_ERROR


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def parse_arguments(parser: argparse.ArgumentParser,
                    arguments: list[str]) -> tuple[argparse.Namespace | None, int]:
    """``(options, 0)``, or ``(None, status)`` after argparse printed ``--help`` (0) or a
    usage error (64): for commands that return their status instead of exiting."""
    try:
        return parser.parse_args(arguments), 0
    except SystemExit as exit_:
        return None, 0 if not exit_.code else USAGE_ERROR
