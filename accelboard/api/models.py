"""API tokens (team-scoped, stored hashed) and the idempotency record of every ingest request."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .choices import TokenKind


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
