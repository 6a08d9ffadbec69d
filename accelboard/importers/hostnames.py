"""Which host names may be stored: one check for every way a host name comes in.

A host name is shown on pages, in alerts and in exports and is the key hosts are found by. A
name holding control or format characters (Unicode categories Cc and Cf, line and paragraph
separators, lone surrogates) is refused: U+202E RIGHT-TO-LEFT OVERRIDE shows ``gpu-node-7`` as
another name than the one stored, a zero-width space makes two hosts look like one, a newline
breaks logs and CSV rows. ``hostname_problem`` says why a name is refused (naming the character
and where it is) or returns None; each way in turns that into its own error: the telemetry API's
422 (``host.hostname``), the serving batches' and uploads' (``host``, ``hardware.host``), a
remote-write series refused and counted (``Hostname`` / ``instance`` labels).
"""

from __future__ import annotations

import unicodedata

# Cc: C0/C1 controls (NUL, newline, ESC); Cf: format (bidi overrides and isolates, zero-width
# characters, the BOM, soft hyphen); Zl/Zp: line and paragraph separators; Cs: lone surrogates.
_REFUSED = {
    "Cc": "a control character",
    "Cf": "a format character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "a lone surrogate",
}


def hostname_problem(value: str) -> str | None:
    """None when ``value`` may be a host name as far as its characters go, else why not:
    ``holds U+202E (RIGHT-TO-LEFT OVERRIDE), a format character, at position 4``. Lengths are
    the caller's (each column has its own)."""
    if value.isascii() and value.isprintable():  # the common case, without a look-up per character
        return None
    for position, char in enumerate(value):
        kind = _REFUSED.get(unicodedata.category(char))
        if kind is not None:
            name = unicodedata.name(char, "")
            named = f" ({name})" if name else ""
            return f"holds U+{ord(char):04X}{named}, {kind}, at position {position}"
    return None
