from __future__ import annotations

from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    name = "accelboard.profiles"
    label = "profiles"
    verbose_name = "Profiles"
