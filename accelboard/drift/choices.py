"""Choices of the drift app: the verdict of a variant's accuracy against its drift budget."""

from __future__ import annotations

from django.db import models

from . import computation


class Verdict(models.TextChoices):
    OVER = computation.OVER, "Over budget"
    TRENDING = computation.TRENDING, "Trending toward the budget"
    WITHIN = computation.WITHIN, "Within budget"
    NO_DATA = computation.NO_DATA, "No reference to compare with"
