"""Single sign-on's writes: the user a provider vouches for, and their teams from its groups.

``sso_sign_in`` runs at every sign-in through the OpenID Connect provider, after the ID token's
signature, issuer, audience and expiry have been checked (``core.oidc``). It either refuses the
sign-in (``SignInRefused``, a sentence naming the claim) having written nothing, or, in one
transaction, finds or creates the user by (issuer, subject) and brings their memberships in line
with the groups claim (``sso_mapping``): memberships the groups give are added or have their role
updated, those single sign-on made earlier and the groups no longer give are removed, and those
made by hand are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from .choices import MembershipSource
from .models import ExternalIdentity, Membership, Team
from .sso_mapping import GroupRule, MappingError, groups_from_claim, memberships_for_groups

logger = logging.getLogger(__name__)


class SignInRefused(Exception):
    """A single sign-on the product will not accept; the message is shown on the login page."""


def _claim_text(claims: Mapping[str, Any], name: str, limit: int = 150) -> str:
    value = claims.get(name)
    return value.strip()[:limit] if isinstance(value, str) else ""


def _free_username(wanted: str) -> str:
    User = get_user_model()
    base = wanted or "user"
    candidate, n = base, 1
    while User.objects.filter(username=candidate).exists():
        n += 1
        candidate = f"{base[:140]}-{n}"
    return candidate


def sso_sign_in(
    *,
    issuer: str,
    claims: Mapping[str, Any],
    groups_claim: str,
    rules: Sequence[GroupRule],
    now: datetime,
) -> Any:
    """The signed-in user, their memberships synced to ``claims[groups_claim]``; see the module."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SignInRefused("The provider's answer has no 'sub' claim naming the user; sign-in refused.")
    if groups_claim not in claims:
        raise SignInRefused(
            f"The provider sent no {groups_claim!r} claim, so accelboard cannot tell your teams; "
            f"ask your administrator to release the {groups_claim!r} claim to accelboard."
        )
    try:
        groups = groups_from_claim(claims[groups_claim], claim=groups_claim)
    except MappingError as exc:
        raise SignInRefused(f"Sign-in refused: {exc}.") from None
    slugs = Team.objects.values_list("slug", flat=True)
    given = memberships_for_groups(groups=groups, rules=rules, team_slugs=slugs)
    if given.unmapped_groups or given.unknown_teams:
        logger.warning(
            "single sign-on of %s: groups in the %r claim that map to no team: %s; mapped teams that do not exist: %s",
            subject,
            groups_claim,
            ", ".join(given.unmapped_groups) or "none",
            ", ".join(given.unknown_teams) or "none",
        )
    if not given.roles:
        seen = ", ".join(groups) if groups else "none"
        raise SignInRefused(
            f"None of your groups in the {groups_claim!r} claim ({seen}) gives a team in accelboard; "
            "ask your administrator to map one (ACCELBOARD_OIDC_GROUPS)."
        )
    User = get_user_model()
    with transaction.atomic():
        identity = (
            ExternalIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=issuer, subject=subject)
            .first()
        )
        if identity is None:
            wanted = _claim_text(claims, "preferred_username") or _claim_text(claims, "email") or subject
            user = User.objects.create_user(username=_free_username(wanted[:150]))
            user.set_unusable_password()
            identity = ExternalIdentity(user=user, issuer=issuer, subject=subject, last_sign_in=now)
        else:
            user = identity.user
            if not user.is_active:
                raise SignInRefused(f"The account {user.get_username()} is disabled in accelboard.")
        user.email = _claim_text(claims, "email", 254) or user.email
        user.first_name = _claim_text(claims, "given_name") or user.first_name
        user.last_name = _claim_text(claims, "family_name") or user.last_name
        user.save()
        identity.groups = list(groups)
        identity.last_sign_in = now
        identity.save()
        _memberships_sync(user=user, roles=given.roles)
    return user


def _memberships_sync(*, user: Any, roles: Mapping[str, str]) -> None:
    held = {m.team_id: m for m in Membership.objects.select_for_update().filter(user=user)}
    teams = {team.pk: team for team in Team.objects.filter(slug__in=roles)}
    for team_id, team in teams.items():
        role = roles[team.slug]
        membership = held.get(team_id)
        if membership is None:
            Membership.objects.create(team=team, user=user, role=role, source=MembershipSource.OIDC)
        elif membership.source == MembershipSource.OIDC and membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
    stale = [
        m.pk for team_id, m in held.items() if m.source == MembershipSource.OIDC and team_id not in teams
    ]
    Membership.objects.filter(pk__in=stale).delete()
