"""Units, sentinels and the hints read from model and folder names."""

from __future__ import annotations

import math

import pytest

from accelboard.importers.naming import (
    accelerator_from_text,
    hints_from_model_name,
    normalise_precision,
    variant_name,
)
from accelboard.importers.units import UnitError, convert, parse_quantity, percentile_token, to_float, to_int


def test_it_reads_cells_with_units_and_sentinels():
    assert parse_quantity("123.45 W") == (123.45, "W")
    assert parse_quantity(" 92 %") == (92.0, "%")
    assert parse_quantity("[N/A]") == (None, "")
    assert parse_quantity("[Not Supported]") == (None, "")
    assert parse_quantity("42") == (42.0, "")
    with pytest.raises(UnitError):
        parse_quantity("lots of W")


def test_it_converts_to_canonical_units():
    assert convert(5_000_000, "ns", "ms") == pytest.approx(5.0)
    assert convert(0.25, "s", "ms") == pytest.approx(250.0)
    assert convert(1, "kWh", "J") == pytest.approx(3.6e6)
    assert convert(2, "MiB", "bytes") == 2 * 1024 * 1024
    assert convert(3, "MB", "bytes") == 3e6
    assert convert(None, "W", "W") is None
    with pytest.raises(UnitError):
        convert(1, "W", "ms")


def test_it_reads_numbers_strictly():
    assert to_float("550") == 550.0
    assert to_float(" 1,234.5 ") == 1234.5
    assert to_float("N/A") is None
    assert to_float(float("nan")) is None
    assert math.isinf(to_float("inf"))
    assert to_int("8") == 8 and to_int(1.0) == 1
    for bad in (True, "12abc", [1]):
        with pytest.raises(UnitError):
            to_float(bad)
    with pytest.raises(UnitError):
        to_int("1.5")


def test_it_names_percentiles():
    assert percentile_token("99.90") == "p999"
    assert percentile_token("50.00") == "p50"
    assert percentile_token("90.0") == "p90"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("neuralmagic/Meta-Llama-3.1-8B-FP8", ("fp8", "")),
        ("TheBloke/Llama-2-7B-GPTQ", ("int4", "GPTQ")),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", ("int4", "AWQ")),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", ("int8", "GPTQ")),
        ("nm-testing/Llama-3.1-8B-quantized.w4a16", ("int4", "")),
        ("unsloth/llama-3-8b-bnb-4bit", ("int4", "bitsandbytes")),
        ("Qwen/Qwen2.5-1.5B", ("", "")),
    ],
)
def test_it_reads_precision_hints_from_model_names(name, expected):
    assert hints_from_model_name(name) == expected


def test_it_normalises_precision_synonyms():
    assert normalise_precision("torch.bfloat16") == "bf16"
    assert normalise_precision("float8") == "fp8"
    assert normalise_precision("int8, fp16") == "int8"
    assert normalise_precision("No change.") == ""
    assert variant_name("int4", "AWQ") == "int4-awq"


def test_it_reads_accelerators_from_folder_names():
    assert accelerator_from_text("1xH100-80GB-SXM") == ("H100-80GB-SXM", 1)
    assert accelerator_from_text("4xNVIDIA_L40S") == ("NVIDIA L40S", 4)
    assert accelerator_from_text("H200-SXM-141GBx8_TRT") == ("H200-SXM-141GB", 8)
    assert accelerator_from_text("1 x NVIDIA A100-SXM4-40GB") == ("NVIDIA A100-SXM4-40GB", 1)
    assert accelerator_from_text("prompt_10") == ("", None)
