"""What a GPU activity is, from its kind and its name: the categories of the time breakdown.

Pure (no Django). A profile's GPU time is split into

- **compute**: ``gemm`` (matrix multiplies: cuBLAS/cuBLASLt, CUTLASS, AMD Tensile ``Cijk_``,
  Triton templates), ``attention`` (flash/fused attention), ``conv`` (cuDNN convolutions,
  implicit-GEMM fprop/dgrad/wgrad, FFT and Winograd), ``elementwise`` (pointwise, reductions,
  normalisation, softmax, copies done by kernels: memory-bandwidth bound work) and
  ``other_compute``;
- **communication**: ``communication`` (NCCL/RCCL kernels and other collectives);
- **memory**: copies by direction (``memcpy_htod``, ``memcpy_dtoh``, ``memcpy_dtod``,
  ``memcpy_peer``, ``memcpy_other``) and ``memset``;
- **idle**: no GPU activity at all (added by the analysis, never a kernel's category).

``ORDER`` is also the priority used when activities on several streams overlap: an instant
counts once, for the first category of this order that is active then. Communication after
compute means that the communication time of a breakdown is the *exposed* part, the part not
hidden behind compute. Name rules are case-insensitive substring tests, checked in the order of
``_RULES``; a name that matches none is ``other_compute``.
"""

from __future__ import annotations

import re

from accelboard.importers.profile_data import KERNEL, MEMCPY, MEMSET, register_classifier

KINDS = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}

COMPUTE = ("gemm", "attention", "conv", "elementwise", "other_compute")
COMMUNICATION = ("communication",)
MEMORY = ("memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_peer", "memcpy_other", "memset")
ORDER: tuple[str, ...] = COMPUTE + COMMUNICATION + MEMORY
IDLE = "idle"
ALL: tuple[str, ...] = ORDER + (IDLE,)

GROUP = {
    **dict.fromkeys(COMPUTE, "compute"),
    **dict.fromkeys(COMMUNICATION, "communication"),
    **dict.fromkeys(MEMORY, "memory"),
    IDLE: "idle",
}
GROUPS = ("compute", "communication", "memory", "idle")

LABELS = {
    "gemm": "GEMM",
    "attention": "Attention",
    "conv": "Convolution",
    "elementwise": "Elementwise / reduction",
    "other_compute": "Other compute",
    "communication": "Communication (NCCL, collectives)",
    "memcpy_htod": "Memcpy host → device",
    "memcpy_dtoh": "Memcpy device → host",
    "memcpy_dtod": "Memcpy device → device",
    "memcpy_peer": "Memcpy peer → peer",
    "memcpy_other": "Memcpy (other)",
    "memset": "Memset",
    "idle": "Idle",
}

# Checked in order; the first rule with a matching fragment (a regular expression) wins.
_RULE_TEXT: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "communication",
        (
            "nccl",
            "rccl",
            "msccl",
            "nvshmem",
            "cross_device_reduce",
            "custom_all_reduce",
            "allreduce",
            "all_reduce",
            "allgather",
            "all_gather",
            "reducescatter",
            "reduce_scatter",
            "alltoall",
            "all_to_all",
            "sendrecv",
        ),
    ),
    (
        "attention",
        (
            "flash",
            "fmha",
            "attention",
            "attn",
            "sdpa",
            "mha_",
            "xformers",
            "flashinfer",
            "paged_attention",
            "ck_tile::fmha",
        ),
    ),
    (
        "conv",
        (
            "conv(?!ert)",
            "fprop",
            "dgrad",
            "wgrad",
            "winograd",
            "fft2d",
            "fft3d",
            "scudnn",
            "implicit_gemm",
            "implicit_convolve",
            "cask_cudnn",
            "im2col",
            "col2im",
        ),
    ),
    (
        "gemm",
        (
            "gemm",
            "gemv",
            "matmul",
            "cutlass",
            "cublas",
            "cijk_",
            "wgmma",
            "xmma",
            "hmma",
            "nvjet",
            "triton_tem",
            "splitkreduce",
            "dot_kernel",
            "bmm",
            "mm_kernel",
            "tensorop",
            "epilogue",
        ),
    ),
    (
        "elementwise",
        (
            "elementwise",
            "reduce",
            "reduction",
            "norm",
            "softmax",
            "dropout",
            "pool",
            "copy",
            "fill",
            "triton_poi",
            "triton_red",
            "triton_per",
            "index",
            "scatter",
            "gather",
            "cat_",
            "catarray",
            "multi_tensor_apply",
            "activation",
            "gelu",
            "silu",
            "relu",
            "rotary",
            "rope",
            "embedding",
            "transpose",
            "permute",
            "nchwtonhwc",
            "nhwctonchw",
            "bn_fw",
            "bn_bw",
            "topk",
            "sort",
            "scan",
            "cub::",
            "unrolled",
            "vectorized",
            "distribution",
            "arange",
            "compare",
            "where",
        ),
    ),
)


_RULES = tuple((category, re.compile("|".join(fragments))) for category, fragments in _RULE_TEXT)


def _digits_stand_alone(fragments: tuple[str, ...]) -> bool:
    """True when every digit of every fragment has a non-digit on both sides inside the fragment
    (``fft2d``, ``im2col``): then a run of two or more digits in a name can take no part in a match."""
    return all(
        0 < at < len(fragment) - 1 and not fragment[at - 1].isdigit() and not fragment[at + 1].isdigit()
        for fragment in fragments
        for at, char in enumerate(fragment)
        if char.isdigit()
    )


# Kernel names differ mostly by numbers (``triton_poi_fused_123``, shapes, template arguments): the
# category is looked up by the name with each run of 2+ digits written "00", which matches the
# same fragments (``_digits_stand_alone``), so a trace of a million generated names classifies
# each shape of name once. Bounded: emptied when full.
_DIGIT_RUNS = re.compile(r"\d{2,}")
_CACHEABLE = all(_digits_stand_alone(fragments) for _category, fragments in _RULE_TEXT)
_CACHE_SIZE = 20_000
_cache: dict[str, str] = {}


def kernel_category(name: str, kind: int = KERNEL) -> str:
    """The category of one GPU activity (see the module docstring)."""
    if kind == MEMSET:
        return "memset"
    if kind == MEMCPY:
        return memcpy_direction(name)
    lowered = name.lower()
    if not _CACHEABLE:
        return _kernel_category(lowered)
    key = _DIGIT_RUNS.sub("00", lowered)
    found = _cache.get(key)
    if found is None:
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()
        found = _cache[key] = _kernel_category(key)
    return found


def _kernel_category(lowered: str) -> str:
    for category, pattern in _RULES:
        if pattern.search(lowered):
            return category
    return "other_compute"


def memcpy_direction(name: str) -> str:
    """``Memcpy HtoD (Pinned -> Device)`` -> memcpy_htod; nsys ``[CUDA memcpy Host-to-Device]`` too."""
    lowered = name.lower().replace(" ", "")
    if "htod" in lowered or "host-to-device" in lowered:
        return "memcpy_htod"
    if "dtoh" in lowered or "device-to-host" in lowered:
        return "memcpy_dtoh"
    if "dtod" in lowered or "device-to-device" in lowered:
        return "memcpy_dtod"
    if "ptop" in lowered or "peer" in lowered:
        return "memcpy_peer"
    if "memset" in lowered:
        return "memset"
    return "memcpy_other"


# --- precision -----------------------------------------------------------------------------------

_PRECISION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fp8", re.compile(r"fp8|e4m3|e5m2|f8f6f4|__nv_fp8")),
    ("int8", re.compile(r"int8|i8i8|s8s8|imma|_i8_")),
    ("bf16", re.compile(r"bf16|bfloat16|__nv_bfloat16")),
    ("fp16", re.compile(r"fp16|f16|half|__half|h884|h1688|h16816|hgemm|hmma|_hb_|_hh_")),
    ("tf32", re.compile(r"tf32|xf32|tensorop_s1688")),
)
# AMD Tensile kernels name their data type after "Cijk_<layout>_": S single, H half, B bf16...
_TENSILE = re.compile(r"cijk_[a-z]+_[a-z]+_(?P<types>[a-z]{1,4})(?:_|$)")
_FP32 = re.compile(
    r"sgemm|sgemv|fp32|f32f32|float,|<float|_s1688gemm_f|gcgemm|scudnn|ampere_s|volta_s|turing_s"
)


def kernel_precision(name: str) -> str:
    """The arithmetic precision a GEMM/convolution kernel's name states: fp8, int8, bf16, fp16, tf32,
    fp32, or "" when the name does not say. Tensor-core kernels name their input type; a plain
    ``sgemm`` or a ``<float, ...>`` template is fp32 on CUDA cores."""
    lowered = name.lower()
    for precision, pattern in _PRECISION_PATTERNS:
        if pattern.search(lowered):
            return precision
    tensile = _TENSILE.search(lowered)
    if tensile:
        first = tensile.group("types")[0]
        return {"s": "fp32", "h": "fp16", "b": "bf16", "d": "fp64", "i": "int8"}.get(first, "")
    if _FP32.search(lowered):
        return "fp32"
    return ""


LOW_PRECISION = ("fp8", "int8", "bf16", "fp16")


# Importers fold names beyond their bound into "other" rows of the same category.
register_classifier(kernel_category)
