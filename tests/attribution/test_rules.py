"""Rules mapping workloads to teams and models: specificity, conflicts named, no match.

Pure computation: no database.
"""

from __future__ import annotations

import pytest

from accelboard.attribution.rules import (
    Match,
    Rule,
    RuleConflict,
    Workload,
    rules_check,
    served_model,
    workload_match,
)

RULES = [
    Rule(1, "user", "alice", team="research"),
    Rule(2, "account", "nlp", team="nlp"),
    Rule(3, "namespace", "llm-serving", team="llm"),
    Rule(4, "label", "team=vision", team="vision"),
    Rule(5, "model_name", "meta-llama/Llama-3.1-8B", model="Llama-3.1-8B", variant="bf16"),
    Rule(6, "label", "model=llama-fp8", model="Llama-3.1-8B", variant="fp8"),
    Rule(7, "label", "cost-center=42", team="finance"),
]


def match(workload: Workload, rules: list[Rule] = RULES) -> Match:
    return workload_match(rule_set=rules_check(rules), workload=workload)


def test_it_prefers_a_label_to_the_namespace() -> None:
    found = match(Workload(namespace="llm-serving", labels={"team": "vision", "app": "vllm"}))
    assert (found.team, found.team_rule) == ("vision", 4)
    assert "rule 4 (label team=vision)" in found.why


def test_it_prefers_the_namespace_to_the_account_and_the_account_to_the_user() -> None:
    assert match(Workload(namespace="llm-serving", account="nlp", user="alice")).team == "llm"
    assert match(Workload(namespace="other", account="nlp", user="alice")).team == "nlp"
    assert match(Workload(account="other", user="alice")).team_rule == 1


def test_it_maps_the_model_by_label_before_the_serving_model_name() -> None:
    found = match(Workload(labels={"model": "llama-fp8"}, model_name="meta-llama/Llama-3.1-8B"))
    assert (found.model, found.variant, found.model_rule) == ("Llama-3.1-8B", "fp8", 6)
    assert found.model_source == "label"
    found = match(Workload(model_name="meta-llama/Llama-3.1-8B", served_variant="fp8"))
    assert (found.model, found.variant, found.model_rule) == ("Llama-3.1-8B", "bf16", 5)
    assert found.model_source == "model_name"


def test_without_a_model_rule_the_served_model_and_variant_are_the_workloads() -> None:
    found = match(Workload(namespace="llm-serving", model_name="Qwen3-8B", served_variant="int4-awq"))
    assert (found.model, found.variant, found.model_rule, found.model_source) == (
        "Qwen3-8B",
        "int4-awq",
        None,
        "serving",
    )
    assert (
        found.why
        == "team: rule 3 (namespace llm-serving); model: no rule matches; served Qwen3-8B int4-awq (serving metrics)"
    )
    assert match(Workload(namespace="llm-serving")).model_source is None


def test_the_served_variant_is_the_one_with_the_most_tokens() -> None:
    assert served_model([]) is None
    # Several rows of one variant add up: fp8 2.5M beats bf16 2M, though bf16 has the largest row.
    served = [("M", "fp8", 1_500_000.0), ("M", "bf16", 2_000_000.0), ("M", "fp8", 1_000_000.0)]
    assert served_model(served) == ("M", "fp8")
    # A tie goes to the first by (model, variant); a variant that served nothing still names one.
    assert served_model([("B", "x", 5.0), ("A", "y", 5.0)]) == ("A", "y")
    assert served_model([("A", "fp8", 0.0)]) == ("A", "fp8")


def test_it_says_so_when_no_rule_matches() -> None:
    found = match(Workload(namespace="scratch", labels={"app": "notebook"}, user="bob"))
    assert (found.team, found.team_rule, found.model, found.model_rule) == (None, None, None, None)
    assert found.why == "team: no rule matches; model: no rule matches"


def test_it_picks_the_older_of_two_matching_labels_and_names_the_other() -> None:
    found = match(Workload(labels={"cost-center": "42", "team": "vision"}))
    assert found.team_rule == 4
    assert "listed before rules 7 that also match" in found.why


def test_it_refuses_two_rules_of_one_selector_with_different_teams_naming_both() -> None:
    rules = [*RULES, Rule(8, "namespace", "llm-serving", team="vision")]
    with pytest.raises(RuleConflict, match="rules 3 and 8 both select namespace 'llm-serving'") as caught:
        rules_check(rules)
    assert caught.value.rule_ids == (3, 8)


def test_it_refuses_two_rules_mapping_one_label_to_different_variants() -> None:
    with pytest.raises(RuleConflict) as caught:
        rules_check([*RULES, Rule(9, "label", "model=llama-fp8", model="Llama-3.1-8B", variant="int8")])
    assert caught.value.rule_ids == (6, 9)
    assert "fp8" in str(caught.value) and "int8" in str(caught.value)


def test_it_accepts_the_same_mapping_twice() -> None:
    rules = [*RULES, Rule(10, "namespace", "llm-serving", team="llm")]
    assert match(Workload(namespace="llm-serving"), rules).team_rule == 3


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        (Rule(11, "pod", "x", team="t"), "rule 11.selector"),
        (Rule(11, "label", "no-equals", team="t"), "rule 11.value"),
        (Rule(11, "namespace", "bad\x07name", team="t"), "rule 11.value"),
        (Rule(11, "namespace", "ns"), "rule 11.team"),
        (Rule(11, "model_name", "m", team="t"), "rule 11.team"),
        (Rule(11, "account", "a", model="m"), "rule 11.model"),
        (Rule(11, "namespace", "ns", team="t", variant="fp8"), "rule 11.variant"),
    ],
)
def test_it_refuses_a_malformed_rule_naming_it(rule: Rule, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        rules_check([rule])
