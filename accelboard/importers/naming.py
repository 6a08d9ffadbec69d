"""Precision, quantisation and hardware read from free text: model ids, dtypes, directory names.

Hardware and precision are often missing from a result file (FORMATS.md, general rules); they sit
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


def hints_from_model_name(name: str | None) -> tuple[str, str]:
    """(precision, quantization method) suggested by a model id, e.g. ``"...-AWQ"`` -> ("int4", "AWQ")."""
    if not name:
        return "", ""
    tokens = [t for t in re.split(r"[-_/.\s]+", name.lower()) if t]
    precision = ""
    method = ""
    for token in tokens:
        if token in _METHODS and not method:
            method, default_precision = _METHODS[token]
            precision = precision or default_precision
        mapped = _PRECISION_SYNONYMS.get(token)
        if mapped is None:
            # "int4", "4bit", "w4a16" glued to other text, e.g. "gptq4bit" or "fp8dynamic"
            match = re.match(r"^(fp8|nvfp4|mxfp4|fp4|int4|int8|w4a16|w8a8|w4a8|4bit|8bit)", token)
            mapped = _PRECISION_SYNONYMS.get(match.group(1)) if match else None
        if mapped is not None and mapped not in {"fp32"}:
            # an explicit bit width beats a method's default (GPTQ-Int8 is int8)
            precision = mapped
    return precision, method


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
