#!/usr/bin/env python3
"""Django's command-line utility for accelboard (``accelboard`` is the same, installed)."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from accelboard.cli import main

    sys.exit(main())
