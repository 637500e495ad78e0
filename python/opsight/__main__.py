"""``python -m opsight ...`` is the ``opsight`` command (``python -m opsight run -c t.yaml
main.py ARGS`` runs main.py traced)."""

import sys

from ._cli import main

sys.exit(main())
