"""The profiles app's side of a run's arrival: profiler traces sent with result files.

``benchmarks.arrival_services`` is the one entrance for runs (the API, the upload page, and
through the API ``accelboard upload``). Benchmarks sits below profiles and cannot import it, so
its callers hand it ``UPLOAD_PROFILES``, which implements its ``ProfilePort``:

1. ``preview``: what the upload page shows of a trace dropped among result files (format, ranks,
   steps, verdict); None for a file that is not a trace.
2. ``attach``: the traces stored as one profile of the one run the upload saved
   (``services.profile_attach_to_upload``: zero or several runs is an error naming the count);
   a trace from other hardware than the run's is a warning on the profile, or with ``strict`` a
   refusal (code ``device_mismatch``).

Both turn this app's ``ProfileRejected`` into the port's ``ProfileRefused``, with its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelboard.benchmarks.arrival_services import ProfileRefused
from accelboard.benchmarks.models import BenchmarkRun

from .models import Profile
from .services import ProfileRejected, profile_attach_to_upload, profile_preview


class UploadProfiles:
    """``benchmarks.arrival_services.ProfilePort``, written by this app's services."""

    def preview(self, *, name: str, data: bytes) -> dict[str, Any] | None:
        try:
            return profile_preview(name=name, data=data)
        except ProfileRejected as exc:
            raise ProfileRefused(exc.message, code=exc.code) from None

    def attach(
        self,
        *,
        runs: Sequence[BenchmarkRun],
        files: Sequence[tuple[str, Any]],
        uploaded_by: Any = None,
        strict: bool = False,
    ) -> Profile | None:
        try:
            return profile_attach_to_upload(runs=runs, files=files, uploaded_by=uploaded_by, strict=strict)
        except ProfileRejected as exc:
            raise ProfileRefused(exc.message, code=exc.code) from None


UPLOAD_PROFILES = UploadProfiles()
