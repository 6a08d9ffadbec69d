"""Which teams and roles a single sign-on user gets from their provider's groups (pure).

``ACCELBOARD_OIDC_GROUPS`` maps a provider group to a team and a role::

    perf-llm=llm:lead, perf-vision=vision:engineer, finops=*:finance

1. Each comma-separated entry is ``group=team:role``: ``team`` is a team's slug, or ``*`` for
   every team; ``role`` is one of ``lead``, ``engineer``, ``finance``. A group may appear in
   several entries (one per team).
2. A user's memberships are the union over the groups in their claim. Where two groups give one
   team different roles, the stronger wins: lead, then engineer, then finance.
3. Groups in the claim that no entry names are reported back (a warning in the log); a mapping
   to a team slug that does not exist is reported too. Neither is an error by itself: a sign-in
   is refused only when no group gives any team (``SignInRefused`` names the claim).

Known limit: a team renamed (new slug) is no longer matched until the mapping is changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

ROLES = ("lead", "engineer", "finance")  # strongest first
EVERY_TEAM = "*"


class MappingError(ValueError):
    """The group mapping cannot be read; the message names the entry."""


@dataclass(frozen=True)
class GroupRule:
    group: str
    team: str  # a team slug, or EVERY_TEAM
    role: str


@dataclass(frozen=True)
class GroupMemberships:
    """What a user's groups give: role per team slug, and what did not match."""

    roles: dict[str, str]
    unmapped_groups: tuple[str, ...]
    unknown_teams: tuple[str, ...]


def parse_group_mapping(raw: str, *, name: str = "ACCELBOARD_OIDC_GROUPS") -> tuple[GroupRule, ...]:
    """Read ``group=team:role, ...``; a malformed entry raises ``MappingError`` naming it."""
    rules: list[GroupRule] = []
    for position, entry in enumerate(raw.split(","), start=1):
        entry = entry.strip()
        if not entry:
            continue
        group, eq, target = entry.partition("=")
        team, colon, role = target.partition(":")
        group, team, role = group.strip(), team.strip(), role.strip()
        if not eq or not colon or not group or not team:
            raise MappingError(f"{name}: entry {position} ({entry!r}) is not group=team:role")
        if role not in ROLES:
            raise MappingError(
                f"{name}: entry {position} ({entry!r}) has role {role!r}; use one of {', '.join(ROLES)}"
            )
        rules.append(GroupRule(group=group, team=team, role=role))
    return tuple(rules)


def groups_from_claim(value: object, *, claim: str) -> tuple[str, ...]:
    """The claim's groups: a list of strings (or one string); anything else names the claim."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise MappingError(f"the {claim!r} claim must be a list of group names, not {type(value).__name__}")


def memberships_for_groups(
    *, groups: Iterable[str], rules: Iterable[GroupRule], team_slugs: Iterable[str]
) -> GroupMemberships:
    """Role per team slug that ``groups`` give under ``rules`` (rule 2: the stronger role wins)."""
    existing = sorted(set(team_slugs))
    claimed = list(dict.fromkeys(groups))
    roles: dict[str, str] = {}
    matched: set[str] = set()
    unknown: set[str] = set()
    for rule in rules:
        if rule.group not in claimed:
            continue
        matched.add(rule.group)
        if rule.team == EVERY_TEAM:
            targets = existing
        elif rule.team in existing:
            targets = [rule.team]
        else:
            unknown.add(rule.team)
            continue
        for slug in targets:
            held = roles.get(slug)
            if held is None or ROLES.index(rule.role) < ROLES.index(held):
                roles[slug] = rule.role
    return GroupMemberships(
        roles=dict(sorted(roles.items())),
        unmapped_groups=tuple(group for group in claimed if group not in matched),
        unknown_teams=tuple(sorted(unknown)),
    )
