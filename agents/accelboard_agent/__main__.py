"""``python -m accelboard_agent``: the same as the ``accelboard-agent`` console script."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
