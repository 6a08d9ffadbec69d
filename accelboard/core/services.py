"""Writes for teams, membership and job bookkeeping; files written with a transaction's rows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.storage import Storage
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from .choices import JobStatus, MembershipSource, Role
from .models import JobRun, Membership, Team


def team_create(*, name: str, slug: str | None = None, description: str = "") -> Team:
    team, _ = Team.objects.get_or_create(
        slug=slug or slugify(name), defaults={"name": name, "description": description}
    )
    return team


def membership_set(*, team: Team, user: Any, role: str) -> Membership:
    if role not in Role.values:
        raise ValueError(f"role must be one of {', '.join(Role.values)}, not {role!r}")
    # Set by hand: single sign-on leaves it alone from now on (``sso_services``).
    membership, _ = Membership.objects.update_or_create(
        team=team, user=user, defaults={"role": role, "source": MembershipSource.MANUAL}
    )
    return membership


class MembershipError(ValueError):
    """A membership change that would leave a team without a lead, or names no such member."""


@transaction.atomic
def membership_change(*, team: Team, user: Any, role: str | None) -> Membership | None:
    """Set ``user``'s role in ``team`` (``None``: remove them). A team keeps at least one lead,
    so the last lead can be neither removed nor demoted (the rows are locked while checking)."""
    leads = list(
        Membership.objects.select_for_update()
        .filter(team=team, role=Role.TEAM_LEAD)
        .values_list("user_id", flat=True)
    )
    if user.pk in leads and len(leads) == 1 and role != Role.TEAM_LEAD:
        raise MembershipError(
            f"{user.get_username()} is the last lead of {team.name}; make someone else lead first"
        )
    if role is None:
        deleted, _ = Membership.objects.filter(team=team, user=user).delete()
        if not deleted:
            raise MembershipError(f"{user.get_username()} is not a member of {team.name}")
        return None
    return membership_set(team=team, user=user, role=role)


def user_create(*, username: str, password: str, email: str = "", is_staff: bool = False) -> Any:
    User = get_user_model()
    user, created = User.objects.get_or_create(
        username=username, defaults={"email": email, "is_staff": is_staff}
    )
    if created:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


class AccountError(ValueError):
    """A team or user the operator asked for cannot be made as asked (the message says why)."""


@transaction.atomic
def team_add(*, name: str, slug: str = "", description: str = "") -> Team:
    """A new team; ``AccountError`` when its name or slug is taken or the slug is not one."""
    slug = slug or slugify(name)
    if not name.strip():
        raise AccountError("a team needs a name")
    if not slug or slug != slugify(slug):
        raise AccountError(f"slug {slug!r} must be lower-case letters, digits and hyphens")
    if Team.objects.filter(slug=slug).exists():
        raise AccountError(f"a team with slug {slug!r} exists already")
    if Team.objects.filter(name=name).exists():
        raise AccountError(f"a team named {name!r} exists already")
    return Team.objects.create(name=name.strip(), slug=slug, description=description)


@transaction.atomic
def user_add(
    *, username: str, password: str, team: Team, role: str, email: str = "", is_staff: bool = False
) -> Any:
    """A new user, member of ``team`` with ``role``, whose password passes the site's password
    validators; ``AccountError`` naming what is wrong otherwise (nothing is created then)."""
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    if role not in Role.values:
        raise AccountError(f"role must be one of {', '.join(Role.values)}, not {role!r}")
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise AccountError(f"a user named {username!r} exists already")
    user = User(username=username, email=email, is_staff=is_staff)
    try:
        user.full_clean(exclude=["password"])
        validate_password(password, user=user)
    except ValidationError as exc:
        raise AccountError("; ".join(exc.messages)) from None
    user.set_password(password)
    user.save()
    membership_set(team=team, user=user, role=role)
    return user


class JobHandle:
    """What a running job can report back: rows touched and free-form details."""

    def __init__(self) -> None:
        self.rows: int | None = None
        self.detail: dict[str, Any] = {}


@contextmanager
def job_run_record(*, name: str, task_id: str = "") -> Iterator[JobHandle]:
    """Record a job's start, end, duration, rows and error in ``JobRun`` (kept even on failure)."""
    started = time.perf_counter()
    run = JobRun.objects.create(name=name, task_id=task_id or "", started_at=timezone.now())
    handle = JobHandle()
    try:
        yield handle
    except Exception as exc:
        JobRun.objects.filter(pk=run.pk).update(
            status=JobStatus.FAILED,
            finished_at=timezone.now(),
            duration_ms=(time.perf_counter() - started) * 1000,
            error=f"{type(exc).__name__}: {exc}",
            detail=handle.detail,
        )
        raise
    with transaction.atomic():
        JobRun.objects.filter(pk=run.pk).update(
            status=JobStatus.SUCCEEDED,
            finished_at=timezone.now(),
            duration_ms=(time.perf_counter() - started) * 1000,
            rows=handle.rows,
            detail=handle.detail,
        )


# --- Files written inside a transaction ---------------------------------------------------------

_files_written: ContextVar[list[tuple[Storage, str]] | None] = ContextVar("files_written", default=None)


@contextmanager
def transaction_with_files() -> Iterator[None]:
    """``transaction.atomic()`` whose files go with its rows: a file saved inside it (and reported
    with ``stored_file_track``) is deleted when the block rolls back, so a refused request leaves
    nothing under MEDIA_ROOT. Nested blocks hand their files to the enclosing one on success."""
    outer = _files_written.get()
    written: list[tuple[Storage, str]] = []
    token = _files_written.set(written)
    try:
        with transaction.atomic():
            yield
    except BaseException:
        for storage, name in written:
            storage.delete(name)
        raise
    finally:
        _files_written.reset(token)
    if outer is not None:
        outer.extend(written)


def stored_file_track(*, storage: Storage, name: str) -> None:
    """Report a file just saved for a row of the current ``transaction_with_files`` block (none:
    nothing to do; the caller's own transaction handling applies)."""
    written = _files_written.get()
    if written is not None:
        written.append((storage, name))


@contextmanager
def job_run_record_unless_caller(*, name: str, record: bool) -> Iterator[JobHandle]:
    """``job_run_record``, unless the caller is itself a recorded job (``record=False``: the demo
    load): then a handle only, and no ``JobRun`` of the pass's own."""
    if not record:
        yield JobHandle()
        return
    with job_run_record(name=name) as job:
        yield job
