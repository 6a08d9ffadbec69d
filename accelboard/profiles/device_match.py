"""Does a trace come from the run's hardware? The device a profile names against the run's accelerator.

A trace attached to the wrong run (an A100 trace on an H100 run, eight ranks on a one-GPU run)
gives that run a breakdown, a verdict and costs that are not its own. ``device_mismatch`` compares,
and returns one sentence per disagreement, naming both sides; the caller warns (stored with the
profile, shown on its page, returned by the API) or, when asked to be strict, refuses.

1. Names: each device the trace names is resolved with the team's accelerator catalogue (aliases
   included). Resolved to another type than the run's: a mismatch. Not resolved (a device the
   catalogue does not know): a mismatch when the run's model (``product``, else the first word of
   its name with a digit) is not among the device name's words (``H100`` in ``NVIDIA H100 80GB HBM3``; ``L4`` is not in
   ``NVIDIA L40S``). A run with no accelerator type, or a trace naming no device, is not compared.
2. Count: the ranks of the profile (and the world size the trace states) against the run's
   accelerator count. Fewer ranks than GPUs is normal (rank 0's trace alone); more ranks, or a
   world size that differs, is a mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from accelboard.benchmarks.catalogue_selectors import accelerator_catalogue_for
from accelboard.benchmarks.models import BenchmarkRun

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    """The words of a device name, and each pair of neighbours joined (``Gaudi 2`` -> ``gaudi2``)."""
    tokens = _WORD.findall(text.lower())
    return set(tokens) | {a + b for a, b in zip(tokens, tokens[1:], strict=False)}


def _model_word(name: str) -> str:
    """The model in a catalogue name without ``product``: its first word with a digit (``H100`` of
    ``H100 SXM 80GB``), else the whole name; form factor and memory words are not compared."""
    for word in _WORD.findall(name.lower()):
        if any(char.isdigit() for char in word):
            return word
    return name


def names_agree(*, device: str, product: str) -> bool:
    """True when every word of ``product`` (the run's accelerator model) is a word of ``device``."""
    wanted = _WORD.findall(product.lower())
    return bool(wanted) and set(wanted) <= _words(device)


def device_mismatch(
    *, run: BenchmarkRun, devices: Sequence[str], ranks: int, world_size: int | None
) -> list[str]:
    """The ways the profile's hardware disagrees with ``run``'s (module docstring); empty when none."""
    out: list[str] = []
    accelerator = run.accelerator_type
    if accelerator is not None and devices:
        catalogue = accelerator_catalogue_for(team=run.team)
        product = accelerator.product or _model_word(accelerator.name)
        for device in devices:
            match = catalogue.resolve(device)
            if match.resolved:
                if match.target == accelerator.slug:
                    continue
                other = catalogue.entries[match.target].name if match.target in catalogue.entries else device
                out.append(
                    f"The trace ran on {device} ({other}), but this run is on {accelerator.name}: "
                    "a profile from other hardware"
                )
            elif not names_agree(device=device, product=product):
                out.append(
                    f"The trace ran on {device}, but this run is on {accelerator.name}: "
                    "a profile from other hardware"
                )
    count = run.accelerator_count
    if ranks > count:
        out.append(
            f"The trace has {ranks} ranks (devices), but this run used {count} "
            f"accelerator{'s' if count != 1 else ''}"
        )
    elif world_size is not None and world_size != count:
        out.append(
            f"The trace's world size is {world_size} devices, but this run used {count} "
            f"accelerator{'s' if count != 1 else ''}"
        )
    return out


def summary_world_size(ranks: Sequence[Any]) -> int | None:
    """The largest world size the ranks state (``RankTrace.world_size``), None when none does."""
    sizes = [
        trace.world_size for trace in ranks if isinstance(trace.world_size, int) and trace.world_size > 0
    ]
    return max(sizes) if sizes else None
