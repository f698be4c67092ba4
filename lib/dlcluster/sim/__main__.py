"""``python -m dlcluster.sim``: see :mod:`dlcluster.sim.cli`."""

import sys

from .cli import main

sys.exit(main())
