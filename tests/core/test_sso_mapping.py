"""The groups-to-teams mapping of single sign-on (pure: no database)."""

from __future__ import annotations

import pytest

from accelboard.core.sso_mapping import (
    GroupRule,
    MappingError,
    groups_from_claim,
    memberships_for_groups,
    parse_group_mapping,
)

SLUGS = ["infra", "llm", "vision"]


def test_it_reads_group_team_role_entries() -> None:
    rules = parse_group_mapping(" perf-llm=llm:lead , finops=*:finance,, ")
    assert rules == (
        GroupRule(group="perf-llm", team="llm", role="lead"),
        GroupRule(group="finops", team="*", role="finance"),
    )
    assert parse_group_mapping("") == ()


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("perf-llm=llm:boss", "entry 1 ('perf-llm=llm:boss') has role 'boss'"),
        ("a=llm:lead,perf-llm", "entry 2 ('perf-llm') is not group=team:role"),
        ("perf-llm=llm", "entry 1 ('perf-llm=llm') is not group=team:role"),
        ("=llm:lead", "is not group=team:role"),
    ],
)
def test_it_names_the_entry_that_does_not_parse(raw: str, names: str) -> None:
    with pytest.raises(MappingError, match="ACCELBOARD_OIDC_GROUPS") as caught:
        parse_group_mapping(raw)
    assert names in str(caught.value)


def test_the_stronger_role_wins_and_star_is_every_team() -> None:
    rules = parse_group_mapping("perf-vision=vision:engineer,finops=*:finance,perf-llm=llm:lead")
    given = memberships_for_groups(groups=["finops", "perf-vision"], rules=rules, team_slugs=SLUGS)
    assert given.roles == {"infra": "finance", "llm": "finance", "vision": "engineer"}
    given = memberships_for_groups(groups=["perf-llm", "finops"], rules=rules, team_slugs=SLUGS)
    assert given.roles["llm"] == "lead"


def test_it_reports_unmapped_groups_and_unknown_teams() -> None:
    rules = parse_group_mapping("perf-llm=llm:lead,perf-audio=audio:lead")
    given = memberships_for_groups(
        groups=["marketing", "perf-llm", "perf-audio", "marketing"], rules=rules, team_slugs=SLUGS
    )
    assert given.roles == {"llm": "lead"}
    assert given.unmapped_groups == ("marketing",)
    assert given.unknown_teams == ("audio",)
    nothing = memberships_for_groups(groups=["marketing"], rules=rules, team_slugs=SLUGS)
    assert nothing.roles == {}


def test_a_claim_that_is_not_a_list_of_names_is_named() -> None:
    assert groups_from_claim(["a", "b"], claim="groups") == ("a", "b")
    assert groups_from_claim("a", claim="groups") == ("a",)
    assert groups_from_claim(None, claim="groups") == ()
    with pytest.raises(MappingError, match="the 'roles' claim must be a list of group names, not dict"):
        groups_from_claim({"a": 1}, claim="roles")
    with pytest.raises(MappingError, match="'groups' claim"):
        groups_from_claim(["a", 3], claim="groups")
