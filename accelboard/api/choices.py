from __future__ import annotations

from django.db import models


class TokenKind(models.TextChoices):
    INGEST = "ingest", "Ingest only (agents)"
    READ = "read", "Read only"
    READ_WRITE = "read-write", "Read and write"


# Which token kinds may call the write endpoints, and which the read endpoints.
WRITE_KINDS = frozenset({TokenKind.INGEST, TokenKind.READ_WRITE})
READ_KINDS = frozenset({TokenKind.READ, TokenKind.READ_WRITE})
