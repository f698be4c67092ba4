"""``python -m dlcluster``: the same command line as the ``dlcluster`` script (dlcluster.cli)."""

import sys

from .cli import main

sys.exit(main())
