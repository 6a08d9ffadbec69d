"""Arbitrary JSON at the three write endpoints: only 2xx/4xx, and a 4xx stores nothing."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelboard.core.models import Team

from .conftest import inference_payload, post_json, row_counts, run_payload, telemetry_payload

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            found += _paths(item, (*prefix, i))
    return found


@st.composite
def mutated(draw: Any, valid: Any) -> Any:
    """A valid payload with one node replaced by arbitrary JSON, or deleted."""
    payload = copy.deepcopy(valid)
    paths = [path for path in _paths(payload) if path]
    path = draw(st.sampled_from(paths))
    target = payload
    for key in path[:-1]:
        target = target[key]
    if draw(st.booleans()):
        target[path[-1]] = draw(JSON)
    elif isinstance(target, dict):
        del target[path[-1]]
    else:
        target.pop(path[-1])
    return payload


ENDPOINTS = {
    "/api/v1/telemetry": lambda: telemetry_payload(n=4, start=1_764_000_000.0),
    "/api/v1/runs": run_payload,
    "/api/v1/inference-metrics": inference_payload,
}


@pytest.mark.parametrize("url", list(ENDPOINTS))
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_it_answers_arbitrary_json_with_2xx_or_4xx_and_no_partial_writes(
    client: Client, team: Team, rw_token: str, url: str, data: Any
) -> None:
    valid = ENDPOINTS[url]()
    body = data.draw(st.one_of(JSON, mutated(valid)), label="body")
    before = row_counts()
    response = post_json(client, url, None, rw_token, raw=json.dumps(body).encode())
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"code", "message", "path"}
        assert row_counts() == before
