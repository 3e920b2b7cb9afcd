"""``python -m affine_homotopy``: the ``affine-homotopy`` command (see :mod:`affine_homotopy.cli`)."""

import sys

from .cli import main

sys.exit(main())
