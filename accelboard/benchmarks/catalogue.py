"""One identity per model and per accelerator: the built-in catalogue and how a name resolves.

Pure (no Django): the built-in entries are data, and ``ModelCatalogue`` / ``AcceleratorCatalogue``
resolve a raw name against the entries handed in (``catalogue_selectors`` loads a team's: the
built-ins, the database's models and accelerator types, the team's and the shared aliases).

A resolution (``Match``) is one of:

- ``exact``: the name is the canonical one, ignoring case and separators
  (``llama-2-70b`` is ``Llama-2-70B``; ``h100-sxm-80gb`` is ``H100 SXM 80GB``).
- ``alias``: a spelling the catalogue knows maps to exactly one identity: the team's own aliases
  first, then shared ones (set by an admin for every team), then the built-in ones below.
- ``ambiguous``: nothing matched, but ``candidates`` are close (a model of the same family word
  and size, an accelerator of the same chip): never merged without the uploader's choice.
- ``unknown``: nothing close.

**Models.** A raw name is read in two steps: ``importers.naming.split_model_name`` takes off the
precision or quantisation suffix (``-FP8``, ``-AWQ``, ``-GPTQ-Int8``: they set the variant, not
the model), then the base is looked up. Alias keys ignore case and separators (``-``, ``_``,
spaces), an organisation prefix (``meta-llama/``, ``TheBloke/``; an alias written with one
matches that organisation only), and MLPerf's accuracy targets ``-99`` / ``-99.9`` at the end.
So ``llama2-70b-99.9`` and ``NousResearch/Llama-2-70b-chat-hf`` are both Llama-2-70B.
Candidates share the family words before the size (``llama2``, ``llama3.1``) and the size token
(``70b``, ``8x7b``); a name without a size, the family word (``resnet``, ``bert``).

**Accelerators.** A name is compared as a set of words, order and punctuation ignored, vendor
words dropped (``NVIDIA``, ``AMD``, ``Instinct``, ``Tesla``) and ``SXM4``/``SXM5`` read as SXM:
``NVIDIA H100-SXM5-80GB`` and ``H100-80GB-SXM`` are the same words as ``H100 SXM 80GB``.
Memory technology (``HBM3``) and form factors (``PCIe``, ``NVL``, ``OAM``) are kept, since they
tell cards apart; a name without them (``NVIDIA H100``) is ambiguous between the catalogue's H100s.
A name that holds a known spelling plus words that tell nothing (``Simulated H100 80GB HBM3``,
``NVIDIA L4 Tensor Core GPU``) is that type, unless one of its extra words is a chip, a memory size
or a form factor the type does not have (``H200 NVL`` is not the SXM H200).

Canonical names are the demo's (``Llama-2-70B``, ``Llama-3.1-8B``, ``BERT-large``...); others
name their fine-tune (``Llama-3.1-8B-Instruct``). Where a bare name stands for a fine-tune,
``fine_tune`` says which: Llama-2-70B is the chat model MLPerf benchmarks
(``Llama-2-70b-chat-hf``), so the base ``Llama-2-70b-hf`` is only a candidate for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from accelboard.importers.naming import split_model_name

EXACT, ALIAS, AMBIGUOUS, UNKNOWN = "exact", "alias", "ambiguous", "unknown"
# Where an alias comes from, in the order they are tried.
TEAM, SHARED, BUILT_IN = "team", "shared", "built-in"


@dataclass(frozen=True)
class ModelEntry:
    """A canonical model: ``parameters_b`` in billions; ``fine_tune`` "" for base weights."""

    name: str
    family: str = ""
    parameters_b: float | None = None
    fine_tune: str = ""
    task: str = ""
    aliases: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class AcceleratorEntry:
    """An accelerator type as the resolver sees it: ``spellings`` are its built-in aliases and the
    type's own ``match_names``; ``product`` the chip word that makes another name a candidate."""

    slug: str
    name: str
    product: str = ""
    spellings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Alias:
    """A team's or a shared alias: ``name`` as written, ``target`` the canonical model name or the
    accelerator type's slug, ``source`` TEAM or SHARED."""

    name: str
    target: str
    source: str


@dataclass(frozen=True)
class Match:
    """How ``raw`` resolved: ``target`` is the canonical model name or the accelerator type's slug
    (empty unless exact or alias); ``alias`` the spelling that matched and ``source`` its origin."""

    raw: str
    how: str
    target: str = ""
    alias: str = ""
    source: str = ""
    candidates: tuple[str, ...] = ()

    @property
    def resolved(self) -> bool:
        return self.how in (EXACT, ALIAS)


# --- built-in models ------------------------------------------------------------------------------

# Aliases are written without an organisation, so every mirror matches (meta-llama/, NousResearch/,
# TheBloke/...); their quantised builds match through the base name (-AWQ, -GPTQ, -FP8 come off).
BUILTIN_MODELS: tuple[ModelEntry, ...] = (
    ModelEntry(
        "Llama-2-7B-Chat",
        family="Llama 2",
        parameters_b=6.7,
        fine_tune="chat",
        task="llm",
        aliases=("Llama-2-7b-chat-hf",),
    ),
    ModelEntry(
        "Llama-2-70B",
        family="Llama 2",
        parameters_b=69.0,
        fine_tune="chat",
        task="llm",
        aliases=(
            "Llama-2-70b-chat-hf",
            "Llama-2-70B-Chat",
            "llama2-70b",
            "llama2-70b-interactive",
            "llama2-70b-4096",
        ),
        note="the chat model MLPerf Inference benchmarks as llama2-70b-99/-99.9",
    ),
    ModelEntry(
        "Llama-3.1-8B",
        family="Llama 3.1",
        parameters_b=8.0,
        task="llm",
        aliases=("Meta-Llama-3.1-8B",),
    ),
    ModelEntry(
        "Llama-3.1-8B-Instruct",
        family="Llama 3.1",
        parameters_b=8.0,
        fine_tune="instruct",
        task="llm",
        aliases=("Meta-Llama-3.1-8B-Instruct", "llama3.1-8b"),
        note="MLPerf Inference's llama3.1-8b",
    ),
    ModelEntry(
        "Llama-3.1-70B-Instruct",
        family="Llama 3.1",
        parameters_b=70.6,
        fine_tune="instruct",
        task="llm",
        aliases=("Meta-Llama-3.1-70B-Instruct",),
    ),
    ModelEntry(
        "Llama-3.1-405B-Instruct",
        family="Llama 3.1",
        parameters_b=405.0,
        fine_tune="instruct",
        task="llm",
        aliases=("Meta-Llama-3.1-405B-Instruct", "llama3.1-405b"),
        note="MLPerf Inference's llama3.1-405b",
    ),
    ModelEntry(
        "Mixtral-8x7B",
        family="Mixtral",
        parameters_b=46.7,
        fine_tune="instruct",
        task="llm",
        aliases=("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        note="the instruct model MLPerf Inference benchmarks as mixtral-8x7b",
    ),
    ModelEntry(
        "GPT-J-6B-CNN-DailyMail",
        family="GPT-J",
        parameters_b=6.0,
        fine_tune="cnn-dailymail",
        task="llm",
        aliases=("gptj", "gpt-j"),
        note="MLPerf Inference's gptj-99/-99.9, fine-tuned for summarisation",
    ),
    ModelEntry(
        "DeepSeek-R1",
        family="DeepSeek",
        parameters_b=671.0,
        task="llm",
        aliases=("deepseek-r1",),
    ),
    ModelEntry(
        "GPT-3-175B",
        family="GPT-3",
        parameters_b=175.0,
        task="llm",
        aliases=("gpt3",),
        note="MLPerf Training's gpt3",
    ),
    ModelEntry(
        "BERT-large",
        family="BERT",
        parameters_b=0.34,
        fine_tune="squad",
        task="language",
        aliases=("bert", "bert-large-uncased-squad"),
        note="MLPerf's bert-99/-99.9 (SQuAD v1.1) and MLPerf Training's bert",
    ),
    ModelEntry(
        "ResNet-50",
        family="ResNet",
        parameters_b=0.0256,
        task="vision",
        aliases=("resnet50", "resnet", "resnet50-v1.5", "resnet-50"),
        note="MLPerf's resnet50 (Inference) and resnet (Training), ImageNet",
    ),
    ModelEntry(
        "RetinaNet",
        family="RetinaNet",
        parameters_b=0.037,
        task="vision",
        aliases=("retinanet",),
    ),
    ModelEntry("3D-UNet", family="U-Net", task="vision", aliases=("3d-unet",)),
    ModelEntry("DLRM-v2", family="DLRM", task="recommendation", aliases=("dlrm-v2", "dlrm_dcnv2")),
    ModelEntry(
        "SDXL",
        family="Stable Diffusion",
        parameters_b=3.5,
        task="diffusion",
        aliases=("stable-diffusion-xl", "stable-diffusion-xl-base-1.0"),
        note="MLPerf Inference's stable-diffusion-xl",
    ),
    ModelEntry(
        "Whisper-large",
        family="Whisper",
        parameters_b=1.55,
        task="speech",
        aliases=("whisper", "whisper-large-v3"),
        note="MLPerf Inference's whisper (large-v3)",
    ),
)

# --- built-in accelerator spellings ---------------------------------------------------------------

# Spellings by accelerator type slug (``fleet.catalogue.ACCELERATOR_TYPES``): NVML's names, MLPerf
# system descriptions' ``accelerator_model_name``, directory names of results. Several are the
# same words as the type's name and match anyway; they are listed as the spellings met in files.
# The H100 PCIe and NVL and the A100 40GB and PCIe are not built-in types: their spellings apply
# once an admin adds a type with that slug (the admin derives it from the name).
BUILTIN_ACCELERATOR_ALIASES: dict[str, tuple[str, ...]] = {
    "h100-sxm-80gb": (
        "NVIDIA H100-SXM-80GB",
        "NVIDIA H100-SXM5-80GB",
        "H100-80GB-SXM",
        "NVIDIA H100 80GB HBM3",
        "H100-SXM5-80GB",
        "H100 SXM",
        "H100-SXM5",
    ),
    "h100-pcie-80gb": ("NVIDIA H100 PCIe", "H100-PCIe-80GB", "H100 80GB PCIe"),
    "h100-nvl-94gb": ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    "h200-sxm-141gb": (
        "NVIDIA H200",
        "NVIDIA H200-SXM-141GB",
        "NVIDIA H200-SXM5-141GB",
        "H200-141GB-SXM",
        "H200 141GB HBM3e",
        "H200 SXM",
    ),
    "a100-sxm-80gb": ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB", "A100-80GB-SXM", "A100-SXM4-80GB"),
    "a100-sxm-40gb": ("NVIDIA A100-SXM4-40GB", "A100-SXM-40GB", "A100-40GB-SXM"),
    "a100-pcie-80gb": ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
    "l4": ("NVIDIA L4",),
    "l40s": ("NVIDIA L40S",),
    "mi300x": (
        "AMD Instinct MI300X",
        "AMD Instinct MI300X OAM",
        "AMD Instinct MI300X 192GB HBM3",
        "AMD Instinct MI300X VF",
        "MI300X-192GB",
        "MI300X 192GB",
        "AMD MI300X",
    ),
}

# --- keys -----------------------------------------------------------------------------------------

_SEPARATORS = re.compile(r"[-_\s]+")
# Trailing words that name no other weights: MLPerf's accuracy targets (99% or 99.9% of the
# reference's quality; the raw name keeps them).
_IGNORED_TRAILING = frozenset({"99", "99.9"})
_SIZE = re.compile(r"^(?:\d+x)?\d+(?:\.\d+)?[bm]$")
_LEADING_VENDOR = frozenset({"meta"})


def _plain(text: str) -> str:
    return _SEPARATORS.sub("", text.strip().lower())


def split_org(name: str) -> tuple[str, str]:
    """(organisation or folder, last part): ``"meta-llama/Llama-2-70b-hf"`` -> ("meta-llama", ...)."""
    org, _, last = name.strip().replace("\\", "/").rpartition("/")
    return org, last


def model_key(name: str, *, keep_org: bool = False) -> str:
    """The key aliases are compared on: ``"meta-llama/Llama-2-70b-chat-hf"`` -> ``"llama270bchathf"``
    (with ``keep_org``, ``"metallama/llama270bchathf"``); ``"llama2-70b-99.9"`` -> ``"llama270b"``."""
    org, last = split_org(name)
    tokens = [token for token in _SEPARATORS.split(last.lower()) if token]
    while len(tokens) > 1 and tokens[-1] in _IGNORED_TRAILING:
        tokens.pop()
    key = "".join(tokens)
    if keep_org and org:
        return f"{_plain(org)}/{key}"
    return key


def model_signature(name: str) -> tuple[str, str]:
    """(family, size) of a model name: ``"Llama-2-70b-hf"`` -> ("llama2", "70b"),
    ``"Meta-Llama-3.1-8B"`` -> ("llama3.1", "8b"), ``"Mixtral-8x7B"`` -> ("mixtral", "8x7b"),
    ``"resnet50"`` -> ("resnet", ""): the words before the size, or the first word's letters."""
    tokens = [token for token in _SEPARATORS.split(split_org(name)[1].lower()) if token]
    if len(tokens) > 1 and tokens[0] in _LEADING_VENDOR:
        tokens = tokens[1:]
    for position, token in enumerate(tokens):
        if _SIZE.match(token):
            return "".join(tokens[:position]), token
    letters = re.match(r"[a-z]*", tokens[0]) if tokens else None
    return (letters.group() if letters else ""), ""


def model_name_split(raw: str) -> tuple[str, str]:
    """(base, suffix): the name without its precision or quantisation suffix, and the suffix."""
    base, suffix = split_model_name(raw.strip())
    return (base or raw.strip()), suffix


_VENDOR_WORDS = frozenset({"nvidia", "amd", "intel", "tesla", "instinct", "geforce", "radeon", "habana"})
_SXM = re.compile(r"^sxm\d?$")
_FORM_FACTORS = frozenset({"sxm", "pcie", "nvl", "oam", "hgx", "mxm"})
_MEMORY = re.compile(r"^(\d+)(?:g|gb|gib)$")


def accelerator_tokens(name: str) -> frozenset[str]:
    """The words of an accelerator's name that tell it apart: lower case, vendor words dropped,
    ``SXM5`` as ``sxm``, ``80 GB`` / ``80G`` as ``80gb``."""
    words = [word for word in re.split(r"[^a-z0-9.]+", name.lower()) if word and word != "."]
    tokens: list[str] = []
    for word in words:
        if word in _VENDOR_WORDS:
            continue
        if _SXM.match(word):
            word = "sxm"
        elif word in ("pcie", "pci"):
            word = "pcie"
        elif word in ("gb", "gib") and tokens and tokens[-1].isdigit():
            tokens[-1] = f"{tokens[-1]}gb"
            continue
        elif memory := _MEMORY.match(word):
            word = f"{memory.group(1)}gb"
        if word == "e" and tokens and tokens[-1] == "pcie":
            continue
        tokens.append(word)
    return frozenset(tokens)


def accelerator_key(name: str) -> str:
    """``"NVIDIA H100-SXM5-80GB"`` -> ``"80gb h100 sxm"``: the words, sorted."""
    return " ".join(sorted(accelerator_tokens(name)))


def _compact(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "", text.lower())


def _product(entry: AcceleratorEntry) -> str:
    if entry.product:
        return entry.product.lower()
    for token in re.split(r"[^a-z0-9]+", entry.name.lower()):
        if re.search(r"\d", token) and re.search(r"[a-z]", token):
            return token
    return ""


# --- resolvers ------------------------------------------------------------------------------------


@dataclass
class _Index:
    """Alias keys of one tier (team, shared or built-in): key -> (target, alias as written)."""

    with_org: dict[str, tuple[str, str]] = field(default_factory=dict)
    loose: dict[str, tuple[str, str]] = field(default_factory=dict)


class ModelCatalogue:
    """Canonical models and aliases, as one team sees them.

    ``builtin`` are the catalogue's entries (their aliases are tier BUILT_IN); ``models`` the names
    of other models in the database (exact matches only, tried after every alias, so that a model
    row made from a raw name before it had an alias does not keep catching that name);
    ``aliases`` the team's and the shared ones."""

    def __init__(
        self,
        *,
        builtin: Iterable[ModelEntry] = BUILTIN_MODELS,
        models: Iterable[str] = (),
        aliases: Iterable[Alias] = (),
    ) -> None:
        self.entries = {entry.name: entry for entry in builtin}
        self._exact_builtin = {_plain(name): name for name in self.entries}
        # built-in spellings as written (lower case) -> (canonical name, spelling)
        self._literal: dict[str, tuple[str, str]] = {}
        for entry in self.entries.values():
            for spelling in (entry.name, *entry.aliases):
                self._literal.setdefault(spelling.lower(), (entry.name, spelling))
        self._exact_rows: dict[str, str] = {}
        for name in models:
            self._exact_rows.setdefault(_plain(name), name)
        self._tiers: dict[str, _Index] = {TEAM: _Index(), SHARED: _Index(), BUILT_IN: _Index()}
        for alias in aliases:
            self._add(self._tiers[alias.source], alias.name, alias.target)
        for entry in self.entries.values():
            for spelling in (*entry.aliases, entry.name):  # an alias names the key it shares
                self._add(self._tiers[BUILT_IN], spelling, entry.name)
        self._signatures: dict[tuple[str, str], list[str]] = {}
        for entry in self.entries.values():
            for spelling in (entry.name, *entry.aliases):
                self._sign(spelling, entry.name)
        for name in self._exact_rows.values():
            self._sign(name, name)

    @staticmethod
    def _add(index: _Index, spelling: str, target: str) -> None:
        org, _ = split_org(spelling)
        if org:
            index.with_org.setdefault(model_key(spelling, keep_org=True), (target, spelling))
        else:
            index.loose.setdefault(model_key(spelling), (target, spelling))

    def _sign(self, spelling: str, target: str) -> None:
        stem, size = model_signature(spelling)
        if len(stem) >= 2:
            names = self._signatures.setdefault((stem, size), [])
            if target not in names:
                names.append(target)

    def resolve(self, raw: str) -> Match:
        """The canonical model of a raw name, trying the raw name's base (suffix off) and then the
        raw name itself at each step, in this order:

        1. the team's aliases, then shared aliases (their keys);
        2. a built-in name or alias spelled as written (case aside): an MLPerf id such as
           ``llama3.1-8b`` is the benchmark's model even where its key equals another name's;
        3. a built-in canonical name ignoring separators (exact), then a built-in alias's key;
        4. another model in the database by name, ignoring case and separators (exact);
        5. candidates of the same family and size (ambiguous), else unknown."""
        raw = raw.strip()
        if not raw:
            return Match(raw=raw, how=UNKNOWN)
        base, _suffix = model_name_split(raw)
        names = list(dict.fromkeys([base, raw]))
        for source in (TEAM, SHARED):
            if (hit := self._lookup(self._tiers[source], names)) is not None:
                return Match(raw=raw, how=ALIAS, target=hit[0], alias=hit[1], source=source)
        for name in names:
            if (literal := self._literal.get(name.lower())) is not None:
                how = EXACT if literal[1] == literal[0] else ALIAS
                return Match(
                    raw=raw, how=how, target=literal[0], alias="" if how == EXACT else literal[1],
                    source="" if how == EXACT else BUILT_IN,
                )  # fmt: skip
        for name in names:
            if (found := self._exact_builtin.get(_plain(name))) is not None:
                return Match(raw=raw, how=EXACT, target=found)
        if (hit := self._lookup(self._tiers[BUILT_IN], names)) is not None:
            return Match(raw=raw, how=ALIAS, target=hit[0], alias=hit[1], source=BUILT_IN)
        for name in names:
            if (found := self._exact_rows.get(_plain(name))) is not None:
                return Match(raw=raw, how=EXACT, target=found)
        close = self._signatures.get(model_signature(base), [])
        if close:
            return Match(raw=raw, how=AMBIGUOUS, candidates=tuple(close))
        return Match(raw=raw, how=UNKNOWN)

    @staticmethod
    def _lookup(index: _Index, names: list[str]) -> tuple[str, str] | None:
        for name in names:
            hit = index.with_org.get(model_key(name, keep_org=True)) or index.loose.get(model_key(name))
            if hit is not None:
                return hit
        return None

    def is_canonical(self, name: str) -> str | None:
        """The built-in or database model this name spells (case and separators aside), if any."""
        return self._exact_builtin.get(_plain(name)) or self._exact_rows.get(_plain(name))


class AcceleratorCatalogue:
    """Accelerator types (``entries``, by slug) and the team's and shared aliases to their slugs."""

    def __init__(self, *, entries: Iterable[AcceleratorEntry], aliases: Iterable[Alias] = ()) -> None:
        self.entries = {entry.slug: entry for entry in entries}
        self._exact: dict[str, str] = {}
        for entry in self.entries.values():
            self._exact.setdefault(_compact(entry.name), entry.slug)
            self._exact.setdefault(_compact(entry.slug), entry.slug)
        self._tiers: dict[str, dict[str, tuple[str, str]]] = {TEAM: {}, SHARED: {}, BUILT_IN: {}}
        for alias in aliases:
            if alias.target in self.entries:
                self._tiers[alias.source].setdefault(accelerator_key(alias.name), (alias.target, alias.name))
        # by slug: every word of the type's spellings, and each spelling's words
        self._words: dict[str, tuple[frozenset[str], list[tuple[frozenset[str], str]]]] = {}
        for entry in self.entries.values():
            spellings = [(accelerator_tokens(s), s) for s in (*entry.spellings, entry.name)]
            self._words[entry.slug] = (frozenset().union(*(spelled for spelled, _ in spellings)), spellings)
            for spelled, spelling in spellings:  # a spelling names the key it shares
                self._tiers[BUILT_IN].setdefault(" ".join(sorted(spelled)), (entry.slug, spelling))

    def resolve(self, raw: str) -> Match:
        raw = raw.strip()
        if not raw:
            return Match(raw=raw, how=UNKNOWN)
        if (found := self._exact.get(_compact(raw))) is not None:
            return Match(raw=raw, how=EXACT, target=found)
        key = accelerator_key(raw)
        for source in (TEAM, SHARED, BUILT_IN):
            hit = self._tiers[source].get(key)
            if hit is not None:
                return Match(raw=raw, how=ALIAS, target=hit[0], alias=hit[1], source=source)
        tokens = accelerator_tokens(raw)
        within = self._within(tokens)
        if len(within) == 1:
            ((slug, spelling),) = within.items()
            return Match(raw=raw, how=ALIAS, target=slug, alias=spelling, source=BUILT_IN)
        close = tuple(within) or tuple(
            entry.slug
            for entry in self.entries.values()
            if (product := _product(entry)) and product in tokens
        )
        if close:
            return Match(raw=raw, how=AMBIGUOUS, candidates=close)
        return Match(raw=raw, how=UNKNOWN)

    def _within(self, tokens: frozenset[str]) -> dict[str, str]:
        """Types one of whose spellings is among the name's words, where the name's telling words
        (chips, memory sizes, form factors) are all that type's: ``Simulated H100 80GB HBM3`` is
        the SXM H100 (NVML's name plus a word), ``H200 NVL`` is not the SXM H200."""
        telling = {token for token in tokens if re.search(r"\d", token) or token in _FORM_FACTORS}
        found: dict[str, str] = {}
        for slug, (words, spellings) in self._words.items():
            if not telling <= words:
                continue
            for spelled, spelling in spellings:
                if spelled and spelled <= tokens:
                    found[slug] = spelling
                    break
        return found


def builtin_accelerator_entries(
    types: Iterable[tuple[str, str, str, Iterable[str]]],
) -> list[AcceleratorEntry]:
    """Entries from (slug, name, product, match_names) rows, with the built-in spellings added."""
    return [
        AcceleratorEntry(
            slug=slug,
            name=name,
            product=product,
            spellings=(*BUILTIN_ACCELERATOR_ALIASES.get(slug, ()), *match_names),
        )
        for slug, name, product, match_names in types
    ]


def model_defaults(name: str) -> dict[str, Any]:
    """A new model row's family, size, fine-tune and task: the built-in entry's, else the size the
    name states (``"Foo-7B"`` -> 7.0 billion parameters, ``"Bar-350M"`` -> 0.35)."""
    for entry in BUILTIN_MODELS:
        if entry.name == name:
            return {
                "family": entry.family,
                "parameters_b": entry.parameters_b,
                "fine_tune": entry.fine_tune,
                "task": entry.task,
            }
    _family, size = model_signature(name)
    if size and "x" not in size:
        number = float(size[:-1])
        return {"parameters_b": number if size.endswith("b") else number / 1000}
    return {}
