"""Precision, quantisation and hardware read from free text: model ids, dtypes, directory names.

Hardware and precision are often missing from a result file; they sit
in the model's name (``Meta-Llama-3.1-8B-FP8``, ``Llama-2-7B-GPTQ``, ``...-AWQ``, ``-int4``,
``w4a16``), in a dtype string (``torch.bfloat16``, ``float8``), or in a directory name
(``1xH100-80GB-SXM``, ``H200-SXM-141GBx8_TRT``). These helpers return "" when they do not know.
"""

from __future__ import annotations

import re

# Bits per value, to pick the quantised part when a file lists several data types ("int8, fp16").
_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}

_PRECISION_SYNONYMS = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "fp32",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp8": "fp8",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "e4m3": "fp8",
    "int8": "int8",
    "uint8": "int8",
    "w8a8": "int8",
    "w8a16": "int8",
    "8bit": "int8",
    "int4": "int4",
    "uint4": "int4",
    "w4a16": "int4",
    "w4a8": "int4",
    "4bit": "int4",
    "fp4": "fp4",
    "nvfp4": "fp4",
    "mxfp4": "fp4",
}

# Quantisation methods named in model ids and their usual weight precision.
_METHODS = {
    "gptq": ("GPTQ", "int4"),
    "awq": ("AWQ", "int4"),
    "smoothquant": ("SmoothQuant", "int8"),
    "bnb": ("bitsandbytes", ""),
    "bitsandbytes": ("bitsandbytes", ""),
    "gguf": ("GGUF", ""),
    "exl2": ("EXL2", ""),
    "marlin": ("Marlin", "int4"),
}


def normalise_precision(text: str | None) -> str:
    """``"torch.bfloat16"`` -> ``"bf16"``; ``"int8, fp16"`` -> ``"int8"`` (the narrowest); else ""."""
    if not text:
        return ""
    found = []
    for token in re.split(r"[\s,;/|+]+", str(text).lower()):
        token = token.removeprefix("torch.").strip(".()")
        if token in _PRECISION_SYNONYMS:
            found.append(_PRECISION_SYNONYMS[token])
    if not found:
        return ""
    return min(found, key=lambda p: _BITS[p])


def hints_from_model_name(name: str | None, *, explicit: bool = False) -> tuple[str, str]:
    """(precision, quantization method) suggested by a model id, e.g. ``"...-AWQ"`` -> ("int4", "AWQ").

    ``explicit``: only a precision the name spells out (``-Int8``, ``-FP8``), not a method's usual
    one (AWQ is usually int4)."""
    if not name:
        return "", ""
    tokens = [t for t in re.split(r"[-_/.\s]+", name.lower()) if t]
    precision = ""
    method = ""
    for token in tokens:
        if token in _METHODS and not method:
            method, default_precision = _METHODS[token]
            precision = precision or ("" if explicit else default_precision)
        mapped = _PRECISION_SYNONYMS.get(token)
        if mapped is None:
            # "int4", "4bit", "w4a16" glued to other text, e.g. "gptq4bit" or "fp8dynamic"
            match = re.match(r"^(fp8|nvfp4|mxfp4|fp4|int4|int8|w4a16|w8a8|w4a8|4bit|8bit)", token)
            mapped = _PRECISION_SYNONYMS.get(match.group(1)) if match else None
        if mapped is not None and mapped not in {"fp32"}:
            # an explicit bit width beats a method's default (GPTQ-Int8 is int8)
            precision = mapped
    return precision, method


# Words that only qualify a quantisation suffix (``FP8-dynamic``, ``AWQ-GEMM``, ``W4A16-G128``,
# ``FP8-KV``, ``quantized.w4a16``): part of the suffix when next to a quantisation word.
_QUALIFIERS = re.compile(r"^(dynamic|static|gemm|gemv|kv|quantized|sym|asym|channelwise|g\d+)$")
_NOT_PRECISION_SUFFIX = {"fp32", "float", "float32", "tf32", "half"}


def _is_quant_word(token: str) -> bool:
    token = token.lower()
    return token in _METHODS or (token in _PRECISION_SYNONYMS and token not in _NOT_PRECISION_SUFFIX)


def split_model_name(name: str | None) -> tuple[str, str]:
    """(base, suffix): the precision or quantisation suffix of a model id, as written, and the name
    without it. ``"neuralmagic/Meta-Llama-3.1-8B-FP8"`` -> ("neuralmagic/Meta-Llama-3.1-8B", "FP8");
    ``"Qwen2.5-7B-Instruct-FP8-dynamic"`` -> ("Qwen2.5-7B-Instruct", "FP8-dynamic");
    ``"...-Instruct-quantized.w4a16"`` -> (..., "quantized.w4a16"); ``"llama2-70b-99"`` -> (itself, "").
    Only trailing words count, so an accuracy target (``-99``) or a version is never a suffix."""
    if not name:
        return "", ""
    head, slash, last = name.rpartition("/")
    pieces = re.split(r"([-_])", last)  # words and their separators, kept to rebuild the text
    words = pieces[0::2]
    cut = len(words)
    quant_seen = False
    while cut > 1:
        parts = words[cut - 1].split(".")
        if not all(_is_quant_word(part) or _QUALIFIERS.match(part.lower()) for part in parts):
            break
        quant_seen = quant_seen or any(_is_quant_word(part) for part in parts)
        cut -= 1
    if not quant_seen:
        return name, ""
    # qualifiers before the first quantisation word belong to the base name (none usually)
    while cut < len(words) and not any(_is_quant_word(part) for part in words[cut].split(".")):
        cut += 1
    base = "".join(pieces[: 2 * cut - 1])
    suffix = "".join(pieces[2 * cut :])
    return f"{head}{slash}{base}", suffix


def variant_name(precision: str, method: str) -> str:
    """``("int4", "AWQ")`` -> ``"int4-awq"``, ``("fp8", "")`` -> ``"fp8"``."""
    if precision and method:
        return f"{precision}-{method.lower()}"
    return precision or method.lower()


_COUNT_X_NAME = re.compile(r"^(\d{1,3})\s*[x×]\s*(.*[A-Za-z].*)$", re.IGNORECASE)
_NAME_X_COUNT = re.compile(r"^(.*[A-Za-z].*?)[x×](\d{1,3})(?:[_-].*)?$", re.IGNORECASE)
_ACCELERATOR_WORDS = re.compile(
    r"(h100|h200|h20|gh200|gb200|b200|b100|a100|a10g?|a30|a40|l4|l40s?|t4|v100|mi\d{3}x?|"
    r"rtx|tpu|gaudi|trn\d|inf\d|nvidia|amd|instinct)",
    re.IGNORECASE,
)


def accelerator_from_text(text: str) -> tuple[str, int | None]:
    """Accelerator name and count from ``"1xH100-80GB-SXM"``, ``"4xNVIDIA_L40S"``,
    ``"H200-SXM-141GBx8_TRT"`` or ``"1 x NVIDIA A100-SXM4-40GB"``; ("", None) when it names none."""
    text = text.strip()
    match = _COUNT_X_NAME.match(text)
    if match and _ACCELERATOR_WORDS.search(match.group(2)):
        return match.group(2).replace("_", " ").strip(), int(match.group(1))
    match = _NAME_X_COUNT.match(text)
    if match and _ACCELERATOR_WORDS.search(match.group(1)):
        return match.group(1).replace("_", " ").strip(), int(match.group(2))
    return "", None
