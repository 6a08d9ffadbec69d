"""Route secrets at rest: Fernet (AES-128-CBC with HMAC-SHA256) keyed from a setting.

The key is derived with HKDF-SHA256 from ``ROUTE_SECRET_KEY`` when it is set, else from
``SECRET_KEY`` (``settings.ROUTE_SECRET_KEY`` already falls back to it). Rotating the key: put
the old one in ``ROUTE_SECRET_KEYS_OLD`` (comma-separated) beside the new one; secrets encrypted
with an old key are still read, new ones are written with the new key.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_INFO = b"accelboard alert route secrets v1"


def _fernet(secret: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def _keyring() -> MultiFernet:
    keys = [settings.ROUTE_SECRET_KEY, *settings.ROUTE_SECRET_KEYS_OLD]
    return MultiFernet([_fernet(k) for k in keys if k])


class RouteSecretError(Exception):
    """A stored secret that no configured key opens (the key was changed without keeping it)."""


def secret_seal(values: dict[str, Any]) -> str:
    return _keyring().encrypt(json.dumps(values, sort_keys=True).encode()).decode()


def secret_open(token: str) -> dict[str, Any]:
    try:
        data = _keyring().decrypt(token.encode())
    except InvalidToken:
        raise RouteSecretError(
            "This route's secret cannot be read with ROUTE_SECRET_KEY (or the keys in "
            "ROUTE_SECRET_KEYS_OLD): add the key it was stored with, or delete and re-add the route."
        ) from None
    value = json.loads(data)
    assert isinstance(value, dict)
    return value
