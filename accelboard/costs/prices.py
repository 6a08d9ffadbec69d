"""The demo loader's old path to ``price_book_load``, which lives in ``pricebook_selectors``.

Only what the demo imports; delete this module once the demo imports it from its home.
"""

from __future__ import annotations

from .pricebook_selectors import price_book_load

__all__ = ["price_book_load"]
