"""``python -m oamd``."""

import sys

from oamd.cli import main

sys.exit(main())
