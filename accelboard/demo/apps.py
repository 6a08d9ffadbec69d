from __future__ import annotations

from django.apps import AppConfig


class DemoAppConfig(AppConfig):
    """The demo: ``accelboard demo`` and ``demo_fleet``, and the loading banner while it loads.

    No models. It sits beside the layers: it imports any app, and no app imports it (the import
    contract ``demo-beside``); settings name it only by its dotted path.
    """

    name = "accelboard.demo"
    label = "demo"
    verbose_name = "Demo fleet"
