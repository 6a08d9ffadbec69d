"""The API tests' token fixtures, for the profile API tests."""

from tests.api.conftest import ingest_token, make_token

__all__ = ["ingest_token", "make_token"]
