"""Formatting for the alert pages."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def breakable(name: object) -> SafeString:
    """``{{ metric|breakable }}``: a metric name that may wrap after ``_`` or ``.`` (never inside a
    word), escaped, with ``<wbr>`` at those places."""
    text = str(escape(name))
    return mark_safe(text.replace("_", "_<wbr>").replace(".", ".<wbr>"))  # noqa: S308 - escaped above
