"""Teams and who belongs to them, and the record of every background job run."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .access import TeamScopedQuerySet
from .choices import BatchKind, JobStatus, MembershipSource, Role


class _TeamQuerySet(TeamScopedQuerySet["Team"]):
    team_field = "pk"


class Team(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = _TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ENGINEER)
    # Single sign-on removes the memberships it made when the groups no longer give them; those
    # made by hand stay whatever the provider says.
    source = models.CharField(
        max_length=16, choices=MembershipSource.choices, default=MembershipSource.MANUAL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_team_user_unique")]
        ordering = ["team__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.get_role_display()})"


class ExternalIdentity(models.Model):
    """A user as an OpenID Connect provider knows them: its issuer and the subject (``sub``).

    Users signing in through the provider are found by this pair, never by e-mail or user name,
    so a provider account cannot take over a local account that happens to share an address.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True)  # the groups seen at the last sign-in
    last_sign_in = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="externalidentity_issuer_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class JobRun(models.Model):
    """One execution of a background job: what ran, when, how long, how many rows, what failed."""

    name = models.CharField(max_length=120, db_index=True)
    task_id = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.STARTED)
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(null=True, blank=True)
    rows = models.BigIntegerField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["name", "-started_at"], name="jobrun_name_started")]

    def __str__(self) -> str:
        return f"{self.name} {self.status} at {self.started_at:%Y-%m-%d %H:%M:%S}"


class IngestBatch(models.Model):
    """One accepted write, by its client id: a retry finds this row and returns ``result``.

    The row is claimed with ``INSERT ... ON CONFLICT DO NOTHING`` in the same transaction as the
    data (``core.services.ingest_batch_claim``), so the data and this record commit (or vanish)
    together. Every app that takes idempotent writes (fleet's telemetry, the API's runs and
    serving batches) claims here, below all of them. The table keeps the name it was created with
    in the ``api`` app.
    """

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=BatchKind.choices)
    client_id = models.CharField(max_length=128)
    result = models.JSONField(default=dict)
    # The digest of the write's canonical body (``idempotency_services.body_digest``): the same
    # client id with another body is refused (409), not answered as a retry. Empty for claims
    # made before digests were kept: those answer any body as before.
    digest = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "api_ingestbatch"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "client_id"], name="ingestbatch_team_kind_client")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.client_id}"
