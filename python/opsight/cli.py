"""``opsight.cli``: the ``opsight`` command's entry point, kept for ``python -m opsight.cli``
and console scripts installed before the CLI moved to ``opsight._cli``. Library code never
imports either."""

from __future__ import annotations

import sys

from ._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
