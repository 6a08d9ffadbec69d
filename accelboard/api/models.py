"""API tokens (team-scoped, stored hashed) and the idempotency record of every ingest request."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .choices import BatchKind, TokenKind


class ApiToken(models.Model):
    """A bearer token for scripts and agents. Only its sha256 is kept; the token is shown once.

    Tokens are 32 random bytes, so a plain (unsalted, fast) hash is enough: there is nothing to
    brute-force that is cheaper than guessing 256 bits.
    """

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=120, blank=True)
    kind = models.CharField(max_length=16, choices=TokenKind.choices)
    # The token's first 8 characters: shown in lists and used to find the row before comparing hashes.
    prefix = models.CharField(max_length=8, unique=True)
    secret_hash = models.CharField(max_length=64, help_text="sha256 of the full token, hex")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["team__name", "-created_at"]

    def __str__(self) -> str:
        label = f" {self.name}" if self.name else ""
        return f"{self.prefix}…{label} ({self.kind}, {self.team.slug})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class IngestBatch(models.Model):
    """One accepted write, by its client id: a retry finds this row and returns ``result``.

    The row is claimed with ``INSERT ... ON CONFLICT DO NOTHING`` in the same transaction as the
    data, so the data and this record commit (or vanish) together.
    """

    team = models.ForeignKey("core.Team", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=BatchKind.choices)
    client_id = models.CharField(max_length=128)
    result = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "client_id"], name="ingestbatch_team_kind_client")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.client_id}"
