from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelboard.settings")
# The agents' telemetry posts skip the middleware they do not need (accelboard/api/lean.py).
django_application = get_wsgi_application()

from accelboard.api.lean import ingest_dispatch  # noqa: E402 - after Django is set up

application = ingest_dispatch(django_application)
