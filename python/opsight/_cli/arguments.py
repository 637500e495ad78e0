"""argparse with opsight's exit statuses: bad usage (an unknown option, a missing or invalid
value) exits 64 (``exit_codes.USAGE_ERROR``), not argparse's 2, which opsight's commands use
for damaged input."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from .exit_codes import USAGE_ERROR


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")
