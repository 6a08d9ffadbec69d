"""The catalogue's resolution of raw names, pure: built-in aliases, keys, the order of the tiers,
and what is never merged without a choice. No database."""

from __future__ import annotations

import pytest

from accelboard.benchmarks.catalogue import (
    BUILTIN_ACCELERATOR_ALIASES,
    BUILTIN_MODELS,
    SHARED,
    TEAM,
    AcceleratorCatalogue,
    AcceleratorEntry,
    Alias,
    ModelCatalogue,
    accelerator_key,
    builtin_accelerator_entries,
    model_defaults,
    model_key,
    model_signature,
)
from accelboard.demo import benchmark_plan
from accelboard.fleet.catalogue import ACCELERATOR_TYPES

MODELS = ModelCatalogue()


def _accelerators(aliases: tuple[Alias, ...] = ()) -> AcceleratorCatalogue:
    rows = [(t["slug"], t["name"], t["product"], t["match_names"]) for t in ACCELERATOR_TYPES]
    return AcceleratorCatalogue(entries=builtin_accelerator_entries(rows), aliases=aliases)


@pytest.mark.parametrize(
    ("raw", "how", "target"),
    [
        # MLPerf benchmark ids with their accuracy targets; the ids the issue names
        ("llama2-70b-99", "alias", "Llama-2-70B"),
        ("llama2-70b-99.9", "alias", "Llama-2-70B"),
        ("llama2-70b-4096", "alias", "Llama-2-70B"),
        ("llama2-70b-interactive-99", "alias", "Llama-2-70B"),
        ("gptj-99.9", "alias", "GPT-J-6B-CNN-DailyMail"),
        ("bert-99", "alias", "BERT-large"),
        ("resnet50", "alias", "ResNet-50"),
        ("3d-unet-99.9", "alias", "3D-UNet"),
        ("stable-diffusion-xl", "alias", "SDXL"),
        ("mixtral-8x7b", "exact", "Mixtral-8x7B"),
        ("deepseek-r1", "exact", "DeepSeek-R1"),
        # an MLPerf id spelled like another name is read as written: the benchmark runs the Instruct
        ("llama3.1-8b", "alias", "Llama-3.1-8B-Instruct"),
        ("llama3.1-405b", "alias", "Llama-3.1-405B-Instruct"),
        # Hugging Face ids under any organisation, with quantisation suffixes taken off
        ("meta-llama/Llama-2-70b-chat-hf", "alias", "Llama-2-70B"),
        ("NousResearch/Llama-2-70b-chat-hf", "alias", "Llama-2-70B"),
        ("TheBloke/Llama-2-70B-Chat-AWQ", "alias", "Llama-2-70B"),
        ("TheBloke/Llama-2-70B-Chat-GPTQ", "alias", "Llama-2-70B"),
        ("TheBloke/Llama-2-7B-Chat-AWQ", "alias", "Llama-2-7B-Chat"),
        ("neuralmagic/Meta-Llama-3.1-8B-FP8", "alias", "Llama-3.1-8B"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "alias", "Llama-3.1-8B-Instruct"),
        ("meta-llama/Llama-3.1-8B-Instruct", "alias", "Llama-3.1-8B-Instruct"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "alias", "Mixtral-8x7B"),
        ("stabilityai/stable-diffusion-xl-base-1.0", "alias", "SDXL"),
        ("openai/whisper-large-v3", "alias", "Whisper-large"),
        # the demo's names, as the demo writes them and spelled otherwise
        ("Llama-2-70B", "exact", "Llama-2-70B"),
        ("llama-2-70b", "exact", "Llama-2-70B"),
        ("Llama-3.1-8B", "exact", "Llama-3.1-8B"),
        ("Llama-2-70B-FP8", "exact", "Llama-2-70B"),
        ("BERT-large", "exact", "BERT-large"),
        ("ResNet-50", "exact", "ResNet-50"),
        ("Whisper-large", "exact", "Whisper-large"),
        ("SDXL", "exact", "SDXL"),
    ],
)
def test_it_resolves_public_names_to_one_model(raw: str, how: str, target: str) -> None:
    match = MODELS.resolve(raw)
    assert (match.how, match.target) == (how, target), match


@pytest.mark.parametrize(
    ("raw", "candidates"),
    [
        # the base weights beside the chat model the catalogue's Llama-2-70B is
        ("meta-llama/Llama-2-70b-hf", ("Llama-2-70B",)),
        ("llama2_70b_lora", ("Llama-2-70B",)),  # MLPerf Training fine-tunes the base
        ("meta-llama/Llama-2-7b-hf", ("Llama-2-7B-Chat",)),
        ("EleutherAI/gpt-j-6b", ("GPT-J-6B-CNN-DailyMail",)),
        ("mistralai/Mixtral-8x7B-v0.1", ("Mixtral-8x7B",)),
        ("bert-base-uncased", ("BERT-large",)),
        ("resnet101", ("ResNet-50",)),
        ("openai/whisper-large-v2", ("Whisper-large",)),
    ],
)
def test_it_never_merges_a_close_name(raw: str, candidates: tuple[str, ...]) -> None:
    match = MODELS.resolve(raw)
    assert (match.how, match.target, match.candidates) == ("ambiguous", "", candidates)


@pytest.mark.parametrize(
    "raw", ["Qwen/Qwen2.5-7B-Instruct", "Llama-3-8B", "my-team/ranker-v4", "meta-llama/Llama-3.2-1B"]
)
def test_it_knows_nothing_of_other_models(raw: str) -> None:
    assert MODELS.resolve(raw).how == "unknown"


def test_keys_ignore_case_separators_and_accuracy_targets_only() -> None:
    assert model_key("llama2-70b-99.9") == model_key("Llama2_70B") == "llama270b"
    assert model_key("meta-llama/Llama-2-70b-chat-hf") == "llama270bchathf"
    assert model_key("meta-llama/Llama-2-70b-chat-hf", keep_org=True) == "metallama/llama270bchathf"
    # "-99" alone is a name, not a target
    assert model_key("99") == "99"
    assert model_signature("Llama-2-70b-hf") == ("llama2", "70b")
    assert model_signature("Meta-Llama-3.1-8B-Instruct") == ("llama3.1", "8b")
    assert model_signature("Mixtral-8x7B") == ("mixtral", "8x7b")
    assert model_signature("resnet50") == ("resnet", "")


def test_a_teams_alias_comes_before_shared_and_built_in_ones() -> None:
    catalogue = ModelCatalogue(
        models=["Ranker-7B", "Llama-2-70B-Base"],
        aliases=[
            Alias("llama2-70b", "Ranker-7B", SHARED),
            Alias("meta-llama/Llama-2-70b-hf", "Llama-2-70B-Base", TEAM),
            Alias("rnk-7b", "Ranker-7B", SHARED),
        ],
    )
    team = catalogue.resolve("meta-llama/Llama-2-70b-hf")
    assert (team.how, team.target, team.source) == ("alias", "Llama-2-70B-Base", TEAM)
    # an alias with an organisation matches that organisation only
    assert catalogue.resolve("other/Llama-2-70b-hf").how == "ambiguous"
    shared = catalogue.resolve("llama2-70b-99")
    assert (shared.target, shared.source) == ("Ranker-7B", SHARED)
    # a model row in the database: exact by name, after every alias
    assert catalogue.resolve("ranker_7b").how == "exact"
    assert catalogue.resolve("RNK-7B-AWQ").target == "Ranker-7B"


def test_builtin_models_have_distinct_keys_and_named_families() -> None:
    seen: dict[str, str] = {}
    shared = []
    for entry in BUILTIN_MODELS:
        assert entry.family, entry.name
        for spelling in (entry.name, *entry.aliases):
            key = model_key(spelling)
            if seen.setdefault(key, entry.name) != entry.name:
                shared.append((spelling, seen[key]))
            # every built-in spelling resolves to its own entry
            assert MODELS.resolve(spelling).target == entry.name, spelling
    # One MLPerf id is spelled like another model's name: it is read as written (see above).
    assert shared == [("llama3.1-8b", "Llama-3.1-8B")]


def test_new_models_take_their_size_from_the_name() -> None:
    assert model_defaults("Llama-2-70B")["fine_tune"] == "chat"
    assert model_defaults("Acme-Coder-33B") == {"parameters_b": 33.0}
    assert model_defaults("tiny-350m") == {"parameters_b": 0.35}
    assert model_defaults("ranker") == {}


@pytest.mark.parametrize(
    ("raw", "how", "target"),
    [
        ("NVIDIA H100-SXM-80GB", "alias", "h100-sxm-80gb"),
        ("NVIDIA H100-SXM5-80GB", "alias", "h100-sxm-80gb"),
        ("H100-80GB-SXM", "alias", "h100-sxm-80gb"),
        ("NVIDIA H100 80GB HBM3", "alias", "h100-sxm-80gb"),  # NVML's name of the SXM card
        ("H100 SXM 80GB", "exact", "h100-sxm-80gb"),
        ("h100-sxm-80gb", "exact", "h100-sxm-80gb"),
        ("NVIDIA H200-SXM-141GB", "alias", "h200-sxm-141gb"),
        ("NVIDIA H200", "alias", "h200-sxm-141gb"),
        ("NVIDIA A100-SXM4-80GB", "alias", "a100-sxm-80gb"),
        ("AMD Instinct MI300X", "alias", "mi300x"),
        ("AMD Instinct MI300X OAM", "alias", "mi300x"),
        ("AMD Instinct MI300X 192GB HBM3", "alias", "mi300x"),
        ("MI300X-192GB", "alias", "mi300x"),
        ("AMD_Instinct_MI300X_VF", "alias", "mi300x"),
        ("NVIDIA L40S", "alias", "l40s"),
        ("NVIDIA L4", "alias", "l4"),
        # a known spelling among words that tell nothing: the agent's simulated GPU, a long name
        ("Simulated H100 80GB HBM3", "alias", "h100-sxm-80gb"),
        ("NVIDIA L4 Tensor Core GPU", "alias", "l4"),
    ],
)
def test_it_resolves_vendor_spellings_to_one_accelerator(raw: str, how: str, target: str) -> None:
    match = _accelerators().resolve(raw)
    assert (match.how, match.target) == (how, target), match


@pytest.mark.parametrize(
    ("raw", "how", "candidates"),
    [
        ("NVIDIA H100", "ambiguous", ("h100-sxm-80gb",)),  # SXM, PCIe or NVL: not said
        ("H100-80GB", "ambiguous", ("h100-sxm-80gb",)),
        ("NVIDIA H100 PCIe", "ambiguous", ("h100-sxm-80gb",)),  # a PCIe card is not the SXM one
        ("NVIDIA A100-SXM4-40GB", "ambiguous", ("a100-sxm-80gb",)),
        ("NVIDIA L40", "unknown", ()),  # not an L4, nor an L40S
        ("NVIDIA A10G", "unknown", ()),
        # a known spelling among words that tell another card: a form factor, a memory size
        ("NVIDIA H200 NVL", "ambiguous", ("h200-sxm-141gb",)),
        ("NVIDIA H100 SXM 94GB", "ambiguous", ("h100-sxm-80gb",)),
        ("AMD Instinct MI300X 256GB", "ambiguous", ("mi300x",)),
    ],
)
def test_it_never_merges_another_card(raw: str, how: str, candidates: tuple[str, ...]) -> None:
    match = _accelerators().resolve(raw)
    assert (match.how, match.target, match.candidates) == (how, "", candidates)


def test_accelerator_keys_are_words_in_any_order() -> None:
    assert accelerator_key("NVIDIA H100-SXM5-80GB") == accelerator_key("H100 80 GB SXM") == "80gb h100 sxm"
    assert accelerator_key("H100 PCI-E") == "h100 pcie"
    assert accelerator_key("AMD Instinct MI300X (OAM)") == "mi300x oam"


def test_an_admins_new_type_gets_its_spellings_and_a_teams_alias_wins() -> None:
    rows = [(t["slug"], t["name"], t["product"], t["match_names"]) for t in ACCELERATOR_TYPES]
    rows.append(("h100-pcie-80gb", "H100 PCIe 80GB", "H100", []))
    catalogue = AcceleratorCatalogue(
        entries=builtin_accelerator_entries(rows),
        aliases=[Alias("Acme GPU box", "h100-pcie-80gb", TEAM), Alias("gpu-x", "nonexistent", TEAM)],
    )
    assert catalogue.resolve("NVIDIA H100 PCIe").target == "h100-pcie-80gb"
    assert catalogue.resolve("NVIDIA H100").candidates == ("h100-sxm-80gb", "h100-pcie-80gb")
    assert (catalogue.resolve("acme gpu BOX").source, catalogue.resolve("gpu-x").how) == (TEAM, "unknown")


def test_builtin_accelerator_spellings_do_not_collide() -> None:
    entries = [
        AcceleratorEntry(slug, slug, "", spellings) for slug, spellings in BUILTIN_ACCELERATOR_ALIASES.items()
    ]
    seen: dict[str, str] = {}
    for entry in entries:
        for spelling in entry.spellings:
            assert seen.setdefault(accelerator_key(spelling), entry.slug) == entry.slug, spelling


def test_the_demos_names_are_the_catalogues_own() -> None:
    """Uploads join the demo's series only if the demo's names are canonical: each model the demo
    records resolves exactly to itself, each accelerator type it uses too."""
    for model in benchmark_plan.MODELS:
        match = MODELS.resolve(model["name"])
        assert (match.how, match.target) == ("exact", model["name"]), model["name"]
    accelerators = _accelerators()
    for slug in {bench["gpu"] for bench in benchmark_plan.BENCHMARKS}:
        assert accelerators.resolve(slug).target == slug
