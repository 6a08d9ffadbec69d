"""The API tests' token fixtures, and the run with DCGM counters in its window, for the profile tests."""

from tests.api.conftest import ingest_token, make_token, read_token

from .test_hta_page import profiled_run

__all__ = ["ingest_token", "make_token", "profiled_run", "read_token"]
