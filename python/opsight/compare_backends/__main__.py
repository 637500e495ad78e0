"""``python -m opsight.compare_backends``: ``opsight compare-backends``."""

import sys

from .command import command_main

sys.exit(command_main(sys.argv[1:]))
