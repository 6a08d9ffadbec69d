"""``accelboard demo`` starts the simulated CI (``accelboard.demo.ci``): a fresh ingest token of
the regressing team each start (the previous one revoked), handed to ``demo_ci`` with a wait for
the demo data; no team, no posts."""

from __future__ import annotations

from typing import Any

import pytest

from accelboard.api.models import ApiToken
from accelboard.api.services import token_authenticate
from accelboard.demo import ci
from accelboard.fleet.ingest_validation import IngestRejected

pytestmark = pytest.mark.django_db


def test_each_start_makes_a_fresh_token_and_runs_demo_ci_with_it(
    team: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr("django.core.management.call_command", lambda *args: calls.append(args))
    assert ci.main(["--server", "http://127.0.0.1:8000", "--team", team.slug, "--after", "5"]) == 0
    assert ci.main(["--server", "http://127.0.0.1:8000", "--team", team.slug, "--after", "5"]) == 0
    tokens = ApiToken.objects.filter(name=ci.TOKEN_NAME)
    assert tokens.count() == 2 and tokens.filter(revoked_at__isnull=True).count() == 1
    first, second = calls
    assert second[:5] == ("demo_ci", "--server", "http://127.0.0.1:8000", "--team", team.slug)
    options = dict(zip(second[5::2], second[6::2], strict=True))
    assert options["--after"] == "5.0" and float(options["--wait-for-data"]) >= 600
    # The second start's token works, the first's no longer does.
    assert token_authenticate(token=options["--token"]) is not None
    with pytest.raises(IngestRejected):
        token_authenticate(token=dict(zip(first[5::2], first[6::2], strict=True))["--token"])


def test_no_such_team_posts_nothing(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr("django.core.management.call_command", lambda *args: calls.append(args))
    assert ci.main(["--server", "http://127.0.0.1:8000", "--team", "nope"]) == 2
    assert calls == [] and not ApiToken.objects.exists()
