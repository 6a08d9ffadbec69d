"""Traces built to break the reader: nested too deep, NaN or negative times. Each is refused
with an error naming where, through every way a trace comes in (the importer, the API, the
attach form, ``accelboard parse``), and a run's earlier profile stays as it was."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from accelboard.cli import main as accelboard_main
from accelboard.importers import jsonstream, kineto
from accelboard.importers.base import ParseError
from accelboard.importers.jsondepth import MAX_JSON_NESTING
from accelboard.profiles.models import Profile
from accelboard.profiles.services import profile_attach
from accelboard.testing.traces import kineto_document, kineto_event, write_training_trace
from tests import factories

DEEP = 100_000


def _deep_args(depth: int = DEEP, *, nan: bool = False) -> bytes:
    """One kernel event whose ``args`` nest ``depth`` objects deep (gzipped: about 1 KB)."""
    extra = ', "x": NaN' if nan else ""
    event = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2' + extra + ', "args": '
    text = '{"traceEvents": [' + event + '{"a": ' * depth + "1" + "}" * depth + "}]}"
    return gzip.compress(text.encode(), 9)


def _trace() -> bytes:
    buffer = io.BytesIO()
    write_training_trace(buffer, steps=2, layers=2)
    return buffer.getvalue()


def _events(*events: dict[str, Any]) -> bytes:
    return json.dumps(kineto_document(list(events))).encode()


@pytest.mark.parametrize("nan", [False, True], ids=["orjson-path", "standard-library-path"])
def test_args_nested_too_deep_are_a_parse_error_naming_the_event_and_the_limit(nan: bool) -> None:
    with pytest.raises(ParseError) as caught:
        kineto.parse([("deep.json.gz", _deep_args(nan=nan))])
    message = str(caught.value)
    assert message.startswith("deep.json.gz: not a readable trace: traceEvents[0].args.a.a")
    assert f"nested deeper than {MAX_JSON_NESTING} levels" in message and "at character" in message


def test_a_deep_header_value_and_a_deep_element_of_a_bare_array_are_refused() -> None:
    header = '{"deviceProperties": ' + "[" * DEEP + "]" * DEEP + ', "traceEvents": []}'
    with pytest.raises(ParseError, match=r"deviceProperties\[0\]\[0\].*nested deeper than 100 levels"):
        kineto.parse([("header.json", header.encode())])
    bare = '[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}, ' + "[" * DEEP
    with pytest.raises(ParseError, match=r"\[1\]\[0\]\[0\].*nested deeper than 100 levels"):
        kineto.parse([("bare.json", bare.encode())])


def test_a_value_at_the_limit_is_read_and_one_level_more_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """The document, the traceEvents array and the event are 3 of the levels."""
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 64)  # values cut by chunk ends too

    def document(depth: int, *, nan: bool) -> bytes:
        extra = ', "x": NaN' if nan else ""
        args = '{"a": ' * depth + "1" + "}" * depth
        event = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2' + extra + ', "args": '
        return ('{"traceEvents": [' + event + args + "}]}").encode()

    for nan in (False, True):
        trace = kineto.parse([("ok.json", document(MAX_JSON_NESTING - 3, nan=nan))]).ranks[0]
        assert trace.events.dur.tolist() == [2.0]
        with pytest.raises(ParseError, match="nested deeper than 100 levels"):
            kineto.parse([("deep.json", document(MAX_JSON_NESTING - 2, nan=nan))])


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("dur", float("nan"), "traceEvents[1].dur: nan"),
        ("dur", -3.0, "traceEvents[1].dur: -3.0"),
        ("dur", float("inf"), "traceEvents[1].dur: inf"),
        ("ts", float("nan"), "traceEvents[1].ts: nan"),
        ("ts", float("-inf"), "traceEvents[1].ts: -inf"),
    ],
)
def test_nan_negative_or_infinite_times_are_a_parse_error_naming_the_event(
    field: str, value: float, where: str
) -> None:
    bad = kineto_event("k2", "kernel", 10.0, 2.0)
    bad[field] = value
    with pytest.raises(ParseError) as caught:
        kineto.parse([("times.json", _events(kineto_event("k", "kernel", 5.0, 1.0), bad))])
    assert where in str(caught.value) and "times.json" in str(caught.value)


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'{"traceEvents": 5}', "traceEvents: expected an array of events, found number 5"),
        (b'{"traceEvents": {"ph": "X"}}', "traceEvents: expected an array of events, found object"),
        (b'{"traceEvents": [5]}', "traceEvents[0]: expected an event (an object), found number 5"),
        (
            _events(
                kineto_event("k", "kernel", 5.0, 1.0), {**kineto_event("k", "kernel", 0, 2.0), "ts": "12"}
            ),
            "traceEvents[1].ts: string '12' is not a timestamp",
        ),
        (
            _events({k: v for k, v in kineto_event("k", "kernel", 5.0, 1.0).items() if k != "ts"}),
            "traceEvents[0].ts: missing (or null) is not a timestamp",
        ),
        (
            _events(kineto_event("aten::mm", "cpu_op", 1.0, 1.0), kineto_event("k", "kernel", 5.0, -0.5)),
            "traceEvents[1].dur: -0.5",
        ),
    ],
    ids=[
        "array-is-a-number",
        "array-is-an-object",
        "event-is-a-number",
        "string-ts",
        "missing-ts",
        "negative-dur",
    ],
)
def test_malformed_traces_are_a_parse_error_naming_what_and_where(content: bytes, where: str) -> None:
    with pytest.raises(ParseError) as caught:
        kineto.parse([("bad.json", content)])
    assert where in str(caught.value) and "bad.json" in str(caught.value)


def test_a_missing_duration_still_counts_as_zero_with_a_warning() -> None:
    event = kineto_event("k", "kernel", 5.0, 1.0)
    del event["dur"]
    trace = kineto.parse([("nodur.json", _events(event, kineto_event("k", "kernel", 10.0, 2.0)))]).ranks[0]
    assert trace.events.dur.tolist() == [0.0, 2.0]
    assert any("no duration" in warning for warning in trace.warnings)


@pytest.fixture
def profiled_run(team: Any, settings: Any, tmp_path: Path) -> Any:
    settings.MEDIA_ROOT = tmp_path / "media"
    h100 = factories.accelerator_type_from(factories.H100)
    run = factories.run_create(team=team, accelerator_type=h100)
    profile_attach(run=run, files=[("good.json", _trace())])
    return run


def _unchanged(run: Any) -> None:
    profile = Profile.objects.get(run=run)
    assert profile.files == ["good.json"] and profile.steps == 2


@pytest.mark.parametrize(
    "content",
    [
        _deep_args(),
        _events(kineto_event("k", "kernel", 5.0, 1.0), kineto_event("k", "kernel", 6.0, -1.0)),
        _events(kineto_event("k", "kernel", float("nan"), 1.0)),
        b'{"traceEvents": 5}',
        _events({**kineto_event("k", "kernel", 0.0, 1.0), "ts": "5"}),
    ],
    ids=["deep", "negative-duration", "nan-timestamp", "events-not-an-array", "string-timestamp"],
)
def test_the_api_answers_422_and_keeps_the_earlier_profile(
    profiled_run: Any, ingest_token: str, content: bytes
) -> None:
    upload = SimpleUploadedFile("bad.json", content)
    response = Client().post(
        f"/api/v1/runs/{profiled_run.uuid}/profile",
        data={"profile": [upload]},
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["path"] == "profile" and "bad.json" in error["message"]
    assert "traceEvents[" in error["message"] or "traceEvents: expected an array" in error["message"]
    _unchanged(profiled_run)


def test_the_attach_form_shows_the_error_and_keeps_the_earlier_profile(
    profiled_run: Any, engineer: Any, login_client: Any
) -> None:
    response = login_client(engineer).post(
        reverse("profiles:attach", args=[profiled_run.pk]),
        {"profile": SimpleUploadedFile("deep.json.gz", _deep_args())},
    )
    assert response.status_code == 400
    assert "nested deeper than 100 levels" in response.content.decode()
    _unchanged(profiled_run)


def test_accelboard_parse_exits_2_with_the_message(tmp_path: Path, capsys: Any) -> None:
    deep = tmp_path / "deep.json.gz"
    deep.write_bytes(_deep_args())
    assert accelboard_main(["accelboard", "parse", str(deep)]) == 2
    _, err = capsys.readouterr()
    assert "deep.json.gz" in err and "traceEvents[0].args.a.a" in err
    assert "nested deeper than 100 levels" in err
