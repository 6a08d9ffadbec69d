"""Result files nested too deep: a ParseError naming the file, the line and the limit (the
standard library's decoder would recurse into a RecursionError), as file, JSON lines, MLLOG
line, MLPerf JSON, and through the upload API (a 422 naming the file)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accelboard.importers.base import ParseError
from accelboard.importers.jsondepth import MAX_JSON_NESTING, JsonTooDeep, NestingScan, loads, nesting_error
from accelboard.importers.registry import parse_bytes
from tests.api.conftest import row_counts

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEEP = 100_000


def _vllm_with(extra: str) -> bytes:
    """vllm_2025.json, pretty-printed, with one more key whose value is ``extra``."""
    data = json.loads((FIXTURES / "vllm_2025.json").read_bytes())
    text = json.dumps(data, indent=1)
    return (text[: text.rindex("}")] + f',\n "extra": {extra}\n}}').encode()


def test_a_result_file_nested_too_deep_names_the_line_and_the_limit() -> None:
    content = _vllm_with("[" * DEEP + "]" * DEEP)
    line = content.decode().count("\n", 0, content.index(b"[[")) + 1
    with pytest.raises(ParseError) as caught:
        parse_bytes(content, filename="vllm.json")
    assert str(caught.value) == f"vllm.json:{line}: extra[0][0][0][0][0]…: nested deeper than 100 levels"


def test_json_lines_name_the_line_that_nests_too_deep() -> None:
    first = (FIXTURES / "vllm_sweep_rates.jsonl").read_text().splitlines()[0]
    content = f'{first}\n{first[:-1]}, "extra": {"[" * DEEP}{"]" * DEEP}}}\n'.encode()
    with pytest.raises(ParseError, match=r"^sweep.jsonl:2: extra\[0\].*nested deeper than 100 levels"):
        parse_bytes(content, filename="sweep.jsonl")


def test_an_mllog_line_nested_too_deep_is_named() -> None:
    deep = '{"a": ' * DEEP + "1" + "}" * DEEP
    content = (
        ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "submission_benchmark", '
        '"value": "llama2_70b_lora", "metadata": {}}\n'
        f':::MLLOG {{"namespace": "", "time_ms": 2, "event_type": "POINT_IN_TIME", "key": "x", "value": {deep}}}\n'
    ).encode()
    with pytest.raises(ParseError, match=r":2: JSON after :::MLLOG: value\.a\.a.*nested deeper than 100"):
        parse_bytes(content, filename="result_0.txt")


def test_values_at_the_limit_are_read() -> None:
    at_limit = "[" * MAX_JSON_NESTING + "]" * MAX_JSON_NESTING
    assert nesting_error(at_limit) is None and isinstance(loads(at_limit), list)
    assert loads('[NaN, "[[[[", {"k": "]]]"}]')[1:] == ["[[[[", {"k": "]]]"}]
    with pytest.raises(JsonTooDeep) as caught:
        loads('{"s": "[[[[", "x": ' + "[" * MAX_JSON_NESTING + "]" * MAX_JSON_NESTING + "}")
    assert (caught.value.path, caught.value.line) == ("x[0][0][0][0][0]…", 1)


@pytest.fixture
def rw_token(team: Any) -> str:
    from accelboard.api.services import token_create

    return token_create(team=team, kind="read-write", name="ci")[1]


def test_the_upload_api_answers_422_naming_the_file(client: Client, team: Any, rw_token: str) -> None:
    handle = io.BytesIO(_vllm_with("[" * DEEP + "]" * DEEP))
    handle.name = "vllm.json"
    before = row_counts()
    response = client.post(
        "/api/v1/runs", data={"file": [handle], "accelerator": "L4"}, HTTP_AUTHORIZATION=f"Bearer {rw_token}"
    )
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["path"] == "file[0]" and "vllm.json" in error["message"]
    assert "nested deeper than 100 levels" in error["message"]
    assert row_counts() == before


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, {"b": "x\\"]["}, [[[]]]], "c": "[[[["}',
        "[" * 150 + "]" * 150,
        '{"k\\\\": [' + "[" * 98 + "]" * 98 + "]}",
        '{"s": "' + "\\\\" * 5 + '", "t": [[[1]]]}',
    ],
)
def test_a_scan_fed_in_pieces_finds_what_one_scan_finds(text: str) -> None:
    """A stream's value cut anywhere (inside a string, after a backslash) resumes correctly."""
    whole = nesting_error(text)
    for cut in range(len(text) + 1):
        scan = NestingScan()
        found = None
        try:
            if not scan.feed(text[:cut], 0):
                scan.feed(text, scan.resume)
        except JsonTooDeep as exc:
            found = exc
        if whole is None:
            assert found is None, cut
        else:
            assert found is not None and (found.offset, found.path) == (whole.offset, whole.path), cut
