"""The YAML that Hydra/OmegaConf writes (``hydra_config.yaml``, ``.hydra/config.yaml``), read
without a YAML library: block mappings and sequences by indentation, plain or quoted scalars,
``null``/``true``/``false``/numbers, empty ``{}``/``[]`` and one-line flow lists ``[a, b]``.

Anchors, tags, multi-line strings and nested flow collections are refused with the line number
(``YamlError``): better a clear error than a silently wrong config.
"""

from __future__ import annotations

import re
from typing import Any


class YamlError(ValueError):
    def __init__(self, line: int, message: str):
        self.line = line
        super().__init__(f"line {line}: {message}")


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def loads(text: str) -> Any:
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = _strip_comment(raw).rstrip()
        if not stripped.strip() or stripped.strip() in ("---", "..."):
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError(number, "tab in indentation")
        lines.append((number, len(stripped) - len(stripped.lstrip()), stripped.strip()))
    if not lines:
        return None
    value, index = _block(lines, 0, lines[0][1])
    if index != len(lines):
        raise YamlError(lines[index][0], "unexpected indentation")
    return value


def _strip_comment(line: str) -> str:
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _block(lines: list[tuple[int, int, str]], index: int, indent: int) -> tuple[Any, int]:
    if lines[index][2].startswith("- ") or lines[index][2] == "-":
        return _sequence(lines, index, indent)
    return _mapping(lines, index, indent)


def _sequence(lines: list[tuple[int, int, str]], index: int, indent: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while index < len(lines) and lines[index][1] == indent and (lines[index][2] + " ").startswith("- "):
        number, _, text = lines[index]
        rest = text[1:].strip()
        if not rest:
            if index + 1 < len(lines) and lines[index + 1][1] > indent:
                value, index = _block(lines, index + 1, lines[index + 1][1])
                items.append(value)
                continue
            items.append(None)
        elif _key_value(rest) is not None:
            raise YamlError(number, "mappings inside sequences are not supported")
        else:
            items.append(_scalar(rest, number))
        index += 1
    return items, index


def _key_value(text: str) -> tuple[str, str] | None:
    match = re.match(r"^(?:'([^']*)'|\"([^\"]*)\"|([^'\"\s:][^:]*?))\s*:(?:\s+(.*))?$", text)
    if match is None:
        return None
    key = next(group for group in match.groups()[:3] if group is not None)
    return key, (match.group(4) or "").strip()


def _mapping(lines: list[tuple[int, int, str]], index: int, indent: int) -> tuple[dict[str, Any], int]:
    mapping: dict[str, Any] = {}
    while index < len(lines) and lines[index][1] == indent:
        number, _, text = lines[index]
        pair = _key_value(text)
        if pair is None:
            raise YamlError(number, f"expected 'key: value', got {text!r}")
        key, rest = pair
        if key in mapping:
            raise YamlError(number, f"duplicate key {key!r}")
        index += 1
        if rest:
            mapping[key] = _scalar(rest, number)
        elif index < len(lines) and (
            lines[index][1] > indent or (lines[index][1] == indent and lines[index][2].startswith("- "))
        ):
            mapping[key], index = _block(lines, index, lines[index][1])
        else:
            mapping[key] = None
    return mapping, index


def _scalar(text: str, number: int) -> Any:
    if text[0] in "&*!|>":
        raise YamlError(number, f"unsupported YAML ({text[0]!r}: anchors, tags and block strings)")
    if text in ("{}", "[]"):
        return {} if text == "{}" else []
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        if any(char in inner for char in "[]{}"):
            raise YamlError(number, "nested flow collections are not supported")
        return [_scalar(part.strip(), number) for part in inner.split(",") if part.strip()]
    if text.startswith("{"):
        raise YamlError(number, "flow mappings are not supported")
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        body = text[1:-1]
        return body.replace("''", "'") if text[0] == "'" else body.replace('\\"', '"')
    lowered = text.lower()
    if lowered in ("null", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if _NUMBER.match(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    return text
