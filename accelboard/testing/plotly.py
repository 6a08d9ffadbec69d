"""Read values back out of Plotly figure JSON in tests.

Plotly 6 serialises numpy arrays as typed arrays (``{"dtype": "f8", "bdata": "<base64>"}``) that
plotly.js decodes in the browser; a test comparing numbers must decode them the same way.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np


def trace_values(value: Any) -> list[Any]:
    """A trace's ``x``/``y`` as a plain list, whether it is a list or a base64 typed array."""
    if isinstance(value, dict) and "bdata" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if "shape" in value:
            array = array.reshape([int(n) for n in str(value["shape"]).split(",")])
        return array.tolist()
    return list(value)
