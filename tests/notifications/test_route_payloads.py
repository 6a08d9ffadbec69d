"""The alert routes' pure parts: matching, grouping, payloads, signatures and target checks."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from accelboard.notifications import route_payloads as rp
from accelboard.notifications.route_http import retry_after_seconds

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _alert(n: int = 1, **overrides: object) -> rp.RouteAlert:
    values: dict[str, object] = {
        "id": n,
        "kind": "regression",
        "kind_label": "Benchmark regression",
        "severity": "critical",
        "severity_label": "Critical",
        "state": "open",
        "team": "Inference",
        "headline": "p99 latency +21% (13,075.8 → 15,826.4 ms)",
        "where": "Llama-2-70B fp8 · 8× H200 SXM 141GB · Offline, bs64",
        "opened_at": T0,
        "url": f"https://accelboard.example.com/alerts/{n}/",
        "acknowledge_url": f"https://accelboard.example.com/alerts/{n}/#acknowledge",
        "dismiss_url": f"https://accelboard.example.com/alerts/{n}/#dismiss",
        "chart_url": "https://accelboard.example.com/notifications/charts/abc.png",
        "commit": "020959f1c3a0b7d4",
        "evidence": (("Before", "13,075.8 ± 195 ms"), ("After", "15,826.4 ± 210 ms")),
    }
    values.update(overrides)
    return rp.RouteAlert(**values)  # type: ignore[arg-type]


def _message(*alerts: rp.RouteAlert, event: str = "trigger") -> rp.RouteMessage:
    return rp.RouteMessage(
        event=event,
        summary="Critical regression in 020959f1: p99 latency +21% on Llama-2-70B fp8",
        alerts=alerts or (_alert(),),
        delivery_id=7,
        sent_at=T0 + timedelta(minutes=1),
    )


# --- matching and grouping --------------------------------------------------------------------


def _route(**overrides: object) -> rp.RouteRef:
    values: dict[str, object] = {
        "id": 1,
        "team_id": 10,
        "channel": "slack",
        "kind": "",
        "min_severity": "warning",
        "created_at": T0 - timedelta(days=1),
    }
    values.update(overrides)
    return rp.RouteRef(**values)  # type: ignore[arg-type]


def _ref(n: int, **overrides: object) -> rp.RouteAlertRef:
    values: dict[str, object] = {
        "id": n,
        "team_id": 10,
        "kind": "regression",
        "severity": "critical",
        "opened_at": T0,
        "commit": "abc",
    }
    values.update(overrides)
    return rp.RouteAlertRef(**values)  # type: ignore[arg-type]


def test_it_matches_by_team_kind_family_and_minimum_severity() -> None:
    route = _route(kind="production", min_severity="warning")
    assert rp.route_matches(route, _ref(1, kind="slo", severity="critical"))
    assert rp.route_matches(route, _ref(1, kind="hardware", severity="warning"))
    assert not rp.route_matches(route, _ref(1, kind="throttle", severity="info"))
    assert not rp.route_matches(route, _ref(1, kind="regression"))
    assert not rp.route_matches(route, _ref(1, kind="slo", team_id=11))
    assert rp.route_matches(_route(kind="regression"), _ref(1, kind="improvement", severity="warning"))
    assert rp.route_matches(_route(kind="drift"), _ref(1, kind="drift"))


def test_it_does_not_send_alerts_opened_before_the_route() -> None:
    assert not rp.route_matches(_route(created_at=T0 + timedelta(seconds=1)), _ref(1))


def test_it_groups_one_message_per_commit_and_one_pagerduty_event_per_alert() -> None:
    alerts = [_ref(1), _ref(2), _ref(3, commit="def"), _ref(4, commit="")]
    groups = rp.route_groups(
        routes=[_route(id=1), _route(id=2, channel="pagerduty")], alerts=alerts, delivered={(1, 3)}
    )
    by_route = {(g.route_id, g.key): g.alert_ids for g in groups}
    assert by_route == {
        (1, "commit:abc"): [1, 2],
        (1, "alert:4"): [4],
        (2, "alert:1"): [1],
        (2, "alert:2"): [2],
        (2, "alert:3"): [3],
        (2, "alert:4"): [4],
    }


def test_it_holds_back_a_commit_whose_alerts_are_still_arriving() -> None:
    alerts = [_ref(1), _ref(2, opened_at=T0 + timedelta(seconds=30)), _ref(3, commit="old")]
    groups = rp.route_groups(
        routes=[_route()], alerts=alerts, delivered=set(), hold_after=T0 + timedelta(seconds=10)
    )
    assert [(g.key, g.alert_ids) for g in groups] == [("commit:old", [3])]


# --- payloads ---------------------------------------------------------------------------------


def test_it_builds_a_slack_block_kit_message_with_what_the_email_says() -> None:
    payload = rp.slack_payload(_message())
    assert payload["text"].startswith("Critical regression in 020959f1")
    header, section, image, actions = payload["blocks"]
    assert header == {
        "type": "header",
        "text": {"type": "plain_text", "text": payload["text"], "emoji": False},
    }
    text = section["text"]["text"]
    assert "p99 latency +21% (13,075.8 → 15,826.4 ms)" in text
    assert "*Where:* Llama-2-70B fp8 · 8× H200 SXM 141GB · Offline, bs64" in text
    assert "*Since:* 2026-12-01 09:00 UTC · commit `020959f1`" in text
    assert "*Before:* 13,075.8 ± 195 ms" in text
    assert image["image_url"].endswith("/notifications/charts/abc.png")
    assert [(e["text"]["text"], e["url"]) for e in actions["elements"]] == [
        ("Open", "https://accelboard.example.com/alerts/1/"),
        ("Acknowledge", "https://accelboard.example.com/alerts/1/#acknowledge"),
        ("Dismiss", "https://accelboard.example.com/alerts/1/#dismiss"),
    ]


def test_it_escapes_slack_control_characters_and_caps_long_messages() -> None:
    many = tuple(_alert(n, headline="a <b> & c", chart_url="") for n in range(1, 15))
    payload = rp.slack_payload(_message(*many))
    assert "a &lt;b&gt; &amp; c" in payload["blocks"][1]["text"]["text"]
    assert payload["blocks"][-1]["elements"][0]["text"] == "and 4 more alerts of this change"
    assert len(payload["blocks"]) <= 50
    long = rp.slack_payload(rp.RouteMessage("trigger", "x" * 400, (_alert(),), 1, T0))
    assert len(long["blocks"][0]["text"]["text"]) == 150


def test_it_builds_a_teams_adaptive_card() -> None:
    payload = rp.teams_payload(_message())
    attachment = payload["attachments"][0]
    assert payload["type"] == "message"
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    facts = {f["title"]: f["value"] for f in card["body"][2]["facts"]}
    assert facts["Where"].startswith("Llama-2-70B fp8") and facts["Since"] == "2026-12-01 09:00 UTC"
    assert [a["title"] for a in card["body"][4]["actions"]] == ["Open", "Acknowledge", "Dismiss"]


def test_it_builds_pagerduty_trigger_and_resolve_events() -> None:
    key = "R" * 32
    trigger = rp.pagerduty_event(_message(), routing_key=key, source="accelboard.example.com")
    assert trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == "accelboard-alert-1"
    assert trigger["payload"]["severity"] == "critical"
    assert trigger["payload"]["summary"].startswith("p99 latency +21%")
    assert trigger["payload"]["source"] == "accelboard.example.com"
    assert trigger["payload"]["custom_details"]["Before"] == "13,075.8 ± 195 ms"
    assert trigger["links"][0]["href"] == "https://accelboard.example.com/alerts/1/"
    resolve = rp.pagerduty_event(_message(event="resolve"), routing_key=key, source="x")
    assert resolve == {"routing_key": key, "event_action": "resolve", "dedup_key": "accelboard-alert-1"}


def test_it_builds_the_documented_webhook_json() -> None:
    payload = rp.webhook_payload(_message())
    assert payload["version"] == 1 and payload["type"] == "alerts.opened" and payload["delivery_id"] == 7
    alert = payload["alerts"][0]
    assert set(alert) == {
        "id",
        "kind",
        "kind_label",
        "severity",
        "state",
        "team",
        "headline",
        "where",
        "opened_at",
        "commit",
        "url",
        "acknowledge_url",
        "dismiss_url",
        "chart_url",
        "evidence",
    }
    assert alert["opened_at"] == "2026-12-01T09:00:00+00:00"
    assert json.loads(rp.body_bytes(payload)) == payload
    assert rp.webhook_payload(_message(event="resolve"))["type"] == "alerts.closed"


# --- signatures -------------------------------------------------------------------------------


def test_a_signature_verifies_and_a_changed_body_or_old_timestamp_does_not() -> None:
    body = b'{"version":1}'
    header = rp.signature_header(secret="whsec_x", body=body, timestamp=1_700_000_000)
    assert header.startswith("t=1700000000,v1=") and len(header.split("v1=")[1]) == 64
    assert rp.signature_verify(secret="whsec_x", body=body, header=header, now=1_700_000_100) == 1_700_000_000
    with pytest.raises(rp.SignatureError, match="does not match"):
        rp.signature_verify(secret="whsec_x", body=body + b" ", header=header, now=1_700_000_100)
    with pytest.raises(rp.SignatureError, match="does not match"):
        rp.signature_verify(secret="whsec_y", body=body, header=header, now=1_700_000_100)
    with pytest.raises(rp.SignatureError, match="replay window"):
        rp.signature_verify(secret="whsec_x", body=body, header=header, now=1_700_000_000 + 301)
    with pytest.raises(rp.SignatureError, match="no t="):
        rp.signature_verify(secret="whsec_x", body=body, header="v1=abc", now=0)


# --- targets ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "Enter the webhook URL"),
        ("hooks.slack.com/services/T/B/x", "must start with"),
        ("ftp://example.com/x", "must start with"),
        ("https://", "no host"),
        ("https://exa mple.com/", "not a URL"),
        ("https://example.com:99999/", "not a well-formed URL"),
        ("https://user:pw@example.com/", "user name or password"),
    ],
)
def test_it_refuses_a_malformed_url_naming_the_field(url: str, message: str) -> None:
    with pytest.raises(rp.TargetError, match=message) as caught:
        rp.url_check(url)
    assert caught.value.field == "url"


def test_it_accepts_only_slack_incoming_webhook_urls() -> None:
    good = "https://hooks.slack.com/services/T0001/B0001/XXXX"
    assert rp.slack_url_check(good) == good
    for bad in (
        "https://example.com/services/T/B/X",
        "https://hooks.slack.com/workflows/T/A",
        "https://hooks.slack.com/services/",
    ):
        with pytest.raises(rp.TargetError, match="not a Slack incoming webhook"):
            rp.slack_url_check(bad)
    assert rp.slack_url_check("http://127.0.0.1:9/services/x", prefixes=["http://127.0.0.1:9/services/"])


def test_it_checks_the_shape_of_a_pagerduty_routing_key() -> None:
    assert rp.pagerduty_key_check(" " + "a1" * 16 + " ") == "a1" * 16
    for bad in ("", "a" * 31, "a" * 33, "a" * 31 + "-"):
        with pytest.raises(rp.TargetError, match="32 letters and digits") as caught:
            rp.pagerduty_key_check(bad)
        assert caught.value.field == "routing_key"


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:8.8.8.8", True),
    ],
)
def test_it_tells_public_addresses_from_internal_ones(address: str, public: bool) -> None:
    assert rp.address_is_public(address) is public


def test_it_reads_retry_after_in_seconds() -> None:
    assert retry_after_seconds("30") == 30.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None
