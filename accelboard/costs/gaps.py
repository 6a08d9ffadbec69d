"""Why a cost figure is missing: the first input it lacks, in words, and how to supply it. Pure.

A cost needs its inputs in this order, and the first one missing is the reason (a later one may
be missing too, but supplying it would not give a cost yet):

1. the cost rows themselves (serving costs are computed each night: none yet for a window);
2. the GPUs that did the work (a serving metric that names no GPU has nothing to cost);
3. a host (a price row is looked up by the host's provider and region: a run that names no host
   of its team has no price, whatever the price book holds);
4. the accelerator type (prices are per type);
5. a price row for that type at the host's provider and region, valid on the day;
6. an exchange rate into the page's currency, where the price is in another one;
7. a throughput (a cost per 1M units divides the price by the units done per hour).

The hardware page, a profile's cost panel and the capacity plan all say the reason this module
gives, so that a page never says "no price" for a run whose price was never looked up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

PRICE_BOOK_FIX = (
    "add a price row for it in the price book (admin → Accelerator prices, or `accelboard prices import`)"
)


@dataclass(frozen=True)
class CostGap:
    """``code``: a stable id; ``short``: a table cell ("no host"); ``reason`` and ``fix``: a sentence
    each, without the final full stop."""

    code: str
    short: str
    reason: str
    fix: str

    @property
    def text(self) -> str:
        """The reason and the fix as sentences: "The run names no host ... Fix: upload ..."."""
        return f"{self.reason[:1].upper()}{self.reason[1:]}. Fix: {self.fix}."


def cost_gap(
    *,
    subject: str = "the run",
    computed: bool = True,
    gpus_named: bool = True,
    host: str | None,
    accelerator: str | None,
    price_found: bool,
    provider: str = "",
    region: str = "",
    rate_found: bool = True,
    currency: str = "",
    to_currency: str = "",
    throughput: bool = True,
) -> CostGap | None:
    """The first input (module doc) a cost lacks, or None when it has every one. ``host``: the
    host's name (None: no host); ``accelerator``: the type's name (None: unknown)."""
    if not computed:
        return CostGap(
            "not-computed",
            "not computed yet",
            f"no costs are computed for {subject} yet",
            "they are computed each night; for past days run `accelboard costs recompute --month YYYY-MM`",
        )
    if not gpus_named:
        return CostGap(
            "no-gpus-named",
            "no GPUs named",
            f"{subject} names no GPU, so no GPU time can be costed",
            "send the serving metrics with the GPUs' UUIDs (accelerator_uuids)",
        )
    if host is None:
        return CostGap(
            "no-host",
            "no host",
            f"{subject} names no host of its team, so no price can be looked up "
            "(a price row is found by the host's provider and region)",
            "upload the result with its host (hardware.host, the name its agent reports), "
            "then recompute the run's cost",
        )
    if accelerator is None:
        return CostGap(
            "no-accelerator-type",
            "unknown GPU type",
            f"the accelerator type of {subject} on {host} is unknown, and prices are per type",
            "let the host's agent report its GPUs (their name sets the type)",
        )
    if not price_found:
        where = " ".join(part for part in (provider, region) if part) or "its provider and region"
        return CostGap(
            "no-price",
            "no price",
            f"the price book has no price row for {accelerator} at {where} (host {host})",
            PRICE_BOOK_FIX,
        )
    if not rate_found:
        return CostGap(
            "no-exchange-rate",
            "no exchange rate",
            f"the price is in {currency or 'another currency'} and the price book has no exchange rate"
            + (f" into {to_currency}" if to_currency else ""),
            "add the exchange rate to the price book",
        )
    if not throughput:
        return CostGap(
            "no-throughput",
            "no throughput",
            f"{subject} has no throughput metric to cost a unit of work by",
            "upload a result that reports throughput (tokens, samples or requests per second)",
        )
    return None


def cost_gap_from_flags(
    flags: Iterable[str],
    *,
    subject: str = "the run",
    host: str | None,
    accelerator: str | None,
    provider: str = "",
    region: str = "",
    currency: str = "",
    throughput: bool = True,
) -> CostGap | None:
    """:func:`cost_gap` from a stored cost's flags (``RunCost``, ``ServingCostDaily``: "no-host",
    "no-accelerator-price", "no-exchange-rate", "no-gpus-named")."""
    flags = set(flags)
    return cost_gap(
        subject=subject,
        gpus_named="no-gpus-named" not in flags,
        host=None if "no-host" in flags else host,
        accelerator=accelerator,
        price_found="no-accelerator-price" not in flags,
        provider=provider,
        region=region,
        rate_found="no-exchange-rate" not in flags,
        currency=currency,
        throughput=throughput,
    )
