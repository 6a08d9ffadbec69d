"""accelboard host agent: samples GPUs through NVML, wraps benchmarks, scrapes serving metrics.

Runs on GPU hosts with Python 3.9+, the standard library and ``nvidia-ml-py`` only; it talks to
the accelboard server over HTTP (``docs/api-contract.md``) and never imports Django.
"""

from __future__ import annotations

__version__ = "0.1.0"
