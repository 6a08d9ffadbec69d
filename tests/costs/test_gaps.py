"""Why a cost is missing (``costs.gaps``): the first input it lacks, and its fix. Pure."""

from __future__ import annotations

from accelboard.costs.gaps import cost_gap, cost_gap_from_flags


def test_it_names_the_host_before_the_price_it_could_not_look_up() -> None:
    # A run with no host, no price and no throughput: the host is the real first cause.
    gap = cost_gap(host=None, accelerator="H100 SXM 80GB", price_found=False, throughput=False)
    assert gap is not None and gap.code == "no-host"
    assert gap.text == (
        "The run names no host of its team, so no price can be looked up (a price row is found by "
        "the host's provider and region). Fix: upload the result with its host (hardware.host, the "
        "name its agent reports), then recompute the run's cost."
    )


def test_it_walks_the_inputs_in_order() -> None:
    common = {"host": "gpu-a", "accelerator": "L4", "provider": "on-prem", "region": "east"}
    assert cost_gap(computed=False, **common, price_found=False).code == "not-computed"  # type: ignore[union-attr]
    assert cost_gap(gpus_named=False, **common, price_found=False).code == "no-gpus-named"  # type: ignore[union-attr]
    no_type = cost_gap(host="gpu-a", accelerator=None, price_found=False)
    assert no_type is not None and no_type.code == "no-accelerator-type"
    no_price = cost_gap(**common, price_found=False, throughput=False)
    assert no_price is not None and no_price.code == "no-price"
    assert "no price row for L4 at on-prem east (host gpu-a)" in no_price.reason
    no_rate = cost_gap(**common, price_found=True, rate_found=False, currency="EUR", to_currency="USD")
    assert no_rate is not None and no_rate.reason.endswith("no exchange rate into USD")
    no_tps = cost_gap(**common, price_found=True, throughput=False)
    assert no_tps is not None and no_tps.code == "no-throughput"
    assert cost_gap(**common, price_found=True) is None


def test_it_reads_a_stored_costs_flags() -> None:
    flags = ["no-energy", "no-accelerator-price", "no-host"]
    gap = cost_gap_from_flags(flags, host="gpu-a", accelerator="H100 SXM 80GB")
    assert gap is not None and gap.code == "no-host"
    gap = cost_gap_from_flags(["no-accelerator-price"], host="gpu-a", accelerator="H100 SXM 80GB")
    assert gap is not None and gap.code == "no-price"
    assert cost_gap_from_flags(["no-energy"], host="gpu-a", accelerator="H100 SXM 80GB") is None
