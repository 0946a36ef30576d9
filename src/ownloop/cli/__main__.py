"""``python -m ownloop.cli``: the same as the ``ownloop`` command."""

import sys

from ownloop.cli import main

sys.exit(main())
