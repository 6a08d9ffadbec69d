"""The default catalogue of accelerator types, as pure data (``catalogue_services`` upserts it).

``ACCELERATOR_TYPES`` holds the kinds accelboard knows out of the box: vendor, model (``product``),
memory, form factor, board power. Board power is the vendor's
board power (TDP); memory is what the driver reports for the card (NVML's
total, not the marketing number: an "80GB" H100 shows 81,559 MiB), so that a GPU's reported
memory and its type's agree. ``match_names`` are substrings of the names that NVML, amd-smi and
MLPerf system descriptions use; ``catalogue_services.accelerator_type_match`` picks the longest one
that occurs, so each name a shorter type's name is part of must be listed in full ("NVIDIA L40S"
outranks L4's "NVIDIA L4").
"""

from __future__ import annotations

from typing import Any

GIB = 1024**3
MIB = 1024**2

ACCELERATOR_TYPES: list[dict[str, Any]] = [
    {
        "slug": "h100-sxm-80gb",
        "name": "H100 SXM 80GB",
        "vendor": "nvidia",
        "product": "H100",
        "form_factor": "sxm",
        "architecture": "Hopper",
        "memory_bytes": 81_559 * MIB,
        "board_power_w": 700.0,
        "match_names": ["H100 80GB HBM3", "H100-SXM", "H100 SXM"],
    },
    {
        "slug": "h200-sxm-141gb",
        "name": "H200 SXM 141GB",
        "vendor": "nvidia",
        "product": "H200",
        "form_factor": "sxm",
        "architecture": "Hopper",
        "memory_bytes": 143_771 * MIB,
        "board_power_w": 700.0,
        "match_names": ["H200", "H200-SXM", "H200 141GB HBM3e"],
    },
    {
        "slug": "a100-sxm-80gb",
        "name": "A100 SXM 80GB",
        "vendor": "nvidia",
        "product": "A100",
        "form_factor": "sxm",
        "architecture": "Ampere",
        "memory_bytes": 81_920 * MIB,
        "board_power_w": 400.0,
        "match_names": ["A100-SXM4-80GB", "A100-SXM-80GB", "A100 SXM4 80GB"],
    },
    {
        "slug": "l4",
        "name": "L4",
        "vendor": "nvidia",
        "product": "L4",
        "form_factor": "pcie",
        "architecture": "Ada Lovelace",
        "memory_bytes": 23_034 * MIB,
        "board_power_w": 72.0,
        # Also a substring of "NVIDIA L40" (no S); no L40 type is catalogued, so an L40 would be
        # taken for an L4. Add an "L40" type before such cards appear.
        "match_names": ["NVIDIA L4", "L4"],
    },
    {
        "slug": "l40s",
        "name": "L40S",
        "vendor": "nvidia",
        "product": "L40S",
        "form_factor": "pcie",
        "architecture": "Ada Lovelace",
        "memory_bytes": 46_068 * MIB,
        "board_power_w": 350.0,
        # "NVIDIA L40S" must outrank L4's "NVIDIA L4", which it contains: longest match wins.
        "match_names": ["NVIDIA L40S", "L40S"],
    },
    {
        "slug": "mi300x",
        "name": "MI300X",
        "vendor": "amd",
        "product": "MI300X",
        "form_factor": "oam",
        "architecture": "CDNA 3",
        "memory_bytes": 192 * GIB,
        "board_power_w": 750.0,
        "match_names": ["MI300X", "Instinct MI300X"],
    },
]
