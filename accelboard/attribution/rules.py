"""Rules that map a workload to a team and to a model and variant (docs/attribution.md, "Rules").

Pure computation on plain data; the admin's pages and the allocation job load and store them.

1. A rule selects workloads by one **selector**: a pod label (``key=value``), a namespace, a Slurm
   account or user, or a serving model name, and maps them to a team, to a model (and variant),
   or both.
2. **Specificity.** The team comes from the most specific rule that matches and names a team:
   label, then namespace, then account, then user. The model comes from a label rule, then a
   serving-model-name rule matching the model the workload served (``served_model``), then that
   served model and variant themselves; ``Match.model_source`` says which. Two label rules of one
   level that both match (a workload with two mapped labels): the rule of the lowest id (the
   older) wins, and ``why`` names the other.
3. **Conflicts.** Two rules of one selector and value with different targets (teams, or models
   and variants) make the rule set invalid: ``rules_check`` raises ``RuleConflict`` carrying
   both rules' ids. The same target twice is no conflict.
4. No rule naming a team matches: the team is None (the workload is unattributed).
5. **Served model** (``served_model``): the serving metrics on the devices a workload held, while
   it held them, name model variants; the one with the most generated tokens is the workload's
   (ties: the first by name), its model name what ``model_name`` rules select.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TEAM_SELECTORS = ("label", "namespace", "account", "user")  # most specific first
MODEL_SELECTORS = ("label", "model_name")
SELECTORS = frozenset(TEAM_SELECTORS + MODEL_SELECTORS)
# Where a workload's model came from (``Match.model_source``; choices.ModelSource mirrors them).
SOURCE_LABEL = "label"
SOURCE_MODEL_NAME = "model_name"
SOURCE_SERVING = "serving"
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Rule:
    """``selector`` is one of SELECTORS; ``value`` is ``key=value`` for a label."""

    id: int
    selector: str
    value: str
    team: str | None = None
    model: str | None = None
    variant: str | None = None


@dataclass(frozen=True)
class Workload:
    """What a workload says of itself (docs/attribution.md's wire format)."""

    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    account: str | None = None
    user: str | None = None
    model_name: str | None = None  # the serving model name its metrics carry (``served_model``)
    served_variant: str | None = None  # and the variant they carry


class RuleConflict(ValueError):
    """Two rules of one selector and value map to different targets."""

    def __init__(self, first: Rule, second: Rule, *, what: str) -> None:
        self.rule_ids = (first.id, second.id)
        super().__init__(
            f"rules {first.id} and {second.id} both select {first.selector} {first.value!r} "
            f"but map it to different {what}s ({_target(first, what)} / {_target(second, what)})"
        )


@dataclass(frozen=True)
class RuleSet:
    """A checked rule set: per (selector, value), the first rule naming a team or a model."""

    team: Mapping[tuple[str, str], Rule]
    model: Mapping[tuple[str, str], Rule]


@dataclass(frozen=True)
class Match:
    team: str | None
    team_rule: int | None
    model: str | None
    variant: str | None
    model_rule: int | None
    why: str
    model_source: str | None = None  # SOURCE_LABEL, SOURCE_MODEL_NAME, SOURCE_SERVING; None: no model


def rules_check(rules: Sequence[Rule]) -> RuleSet:
    """A rule set ready to match workloads; ValueError naming a malformed rule, RuleConflict
    naming two that disagree."""
    team: dict[tuple[str, str], Rule] = {}
    model: dict[tuple[str, str], Rule] = {}
    for rule in rules:
        _validate(rule)
        key = (rule.selector, rule.value)
        if rule.team is not None:
            known = team.setdefault(key, rule)
            if known.team != rule.team:
                raise RuleConflict(known, rule, what="team")
        if rule.model is not None:
            known = model.setdefault(key, rule)
            if (known.model, known.variant) != (rule.model, rule.variant):
                raise RuleConflict(known, rule, what="model")
    return RuleSet(team=team, model=model)


def workload_match(*, rule_set: RuleSet, workload: Workload) -> Match:
    """The team and the model of ``workload`` under ``rule_set``, and why (the module's
    docstring, 2): the model of a label rule, else of a ``model_name`` rule, else the model and
    variant the workload served."""
    team_rule, team_why = _best(rule_set.team, TEAM_SELECTORS, workload)
    model_rule, model_why = _best(rule_set.model, MODEL_SELECTORS, workload)
    model, variant, source = None, None, None
    if model_rule is not None:
        model, variant = model_rule.model, model_rule.variant
        source = SOURCE_LABEL if model_rule.selector == "label" else SOURCE_MODEL_NAME
    elif workload.model_name:
        model, variant, source = workload.model_name, workload.served_variant, SOURCE_SERVING
        served = f"{model} {variant or ''}".rstrip()
        model_why = f"no rule matches; served {served} (serving metrics)"
    return Match(
        team=team_rule.team if team_rule else None,
        team_rule=team_rule.id if team_rule else None,
        model=model,
        variant=variant,
        model_rule=model_rule.id if model_rule else None,
        why=f"team: {team_why}; model: {model_why}",
        model_source=source,
    )


def served_model(served: Iterable[tuple[str, str, float]]) -> tuple[str, str] | None:
    """The (model, variant) a workload served, from the serving metrics on the devices it held
    while it held them, as (model, variant, generated tokens) (several per variant allowed): the
    variant with the most tokens, ties to the first by (model, variant); None without metrics."""
    tokens: dict[tuple[str, str], float] = defaultdict(float)
    for model, variant, count in served:
        tokens[(model, variant)] += count
    if not tokens:
        return None
    return min(tokens, key=lambda key: (-tokens[key], key))


def _validate(rule: Rule) -> None:
    at = f"rule {rule.id}"
    if rule.selector not in SELECTORS:
        raise ValueError(f"{at}.selector: {rule.selector!r} is not one of {sorted(SELECTORS)}")
    if not rule.value or CONTROL.search(rule.value):
        raise ValueError(f"{at}.value: empty or holds control characters")
    if rule.selector == "label" and "=" not in rule.value:
        raise ValueError(f"{at}.value: a label rule selects key=value")
    if rule.team is None and rule.model is None:
        raise ValueError(f"{at}.team: a rule maps to a team, a model, or both")
    if rule.selector not in TEAM_SELECTORS and rule.team is not None:
        raise ValueError(f"{at}.team: a {rule.selector} rule maps to a model only")
    if rule.selector not in MODEL_SELECTORS and rule.model is not None:
        raise ValueError(f"{at}.model: a {rule.selector} rule maps to a team only")
    if rule.variant is not None and rule.model is None:
        raise ValueError(f"{at}.variant: a variant needs its model")


def _candidates(selector: str, workload: Workload) -> list[str]:
    if selector == "label":
        return [f"{key}={value}" for key, value in workload.labels.items()]
    value = {
        "namespace": workload.namespace,
        "account": workload.account,
        "user": workload.user,
        "model_name": workload.model_name,
    }[selector]
    return [value] if value else []


def _best(
    table: Mapping[tuple[str, str], Rule], selectors: Sequence[str], workload: Workload
) -> tuple[Rule | None, str]:
    for selector in selectors:
        found = [table[(selector, v)] for v in _candidates(selector, workload) if (selector, v) in table]
        if found:
            found.sort(key=lambda rule: rule.id)
            why = f"rule {found[0].id} ({selector} {found[0].value})"
            if len(found) > 1:
                others = ", ".join(str(rule.id) for rule in found[1:])
                why += f", listed before rules {others} that also match"
            return found[0], why
    return None, "no rule matches"


def _target(rule: Rule, what: str) -> str:
    if what == "model":
        return f"{rule.model} {rule.variant or ''}".rstrip()
    return f"{rule.team}"
