"""The ID token checks of single sign-on, one claim at a time: tokens signed here with a key of
our own, verified as the provider's would be (its JWKS lookup is the one step replaced)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from accelboard.core.oidc import OidcBackend, OidcConfig
from accelboard.core.sso_services import SignInRefused

ISSUER = "https://login.example.org/realms/main"
CLIENT = "accelboard"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class _Backend(OidcBackend):
    def retrieve_matching_jwk(self, token: str) -> Any:
        return jwt.PyJWK.from_dict(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True))


def _backend() -> _Backend:
    backend = _Backend()
    backend.config = OidcConfig(
        issuer=ISSUER,
        client_id=CLIENT,
        client_secret="s",
        groups_claim="groups",
        rules=(),
        provider_name="IdP",
    )
    return backend


def _token(key: Any = KEY, alg: str = "RS256", **changes: Any) -> str:
    claims = {"iss": ISSUER, "aud": CLIENT, "sub": "42", "exp": int(time.time()) + 300, "nonce": "n1"}
    claims.update(changes)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm=alg, headers={"kid": "k1"})


def test_a_good_token_gives_its_claims() -> None:
    assert _backend().verify_token(_token(), nonce="n1")["sub"] == "42"


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (lambda: _token(key=OTHER_KEY), "signature does not verify"),
        (lambda: _token(iss="https://evil.example.org"), "'iss' claim"),
        (lambda: _token(aud="someone-else"), "'aud' claim"),
        (lambda: _token(exp=int(time.time()) - 3600), "'exp' claim"),
        (lambda: _token(nonce="replayed"), "'nonce' claim"),
        (lambda: _token(sub=None), "no 'sub' claim"),
        (lambda: _token(key="a-shared-secret-of-32-bytes-or-more!", alg="HS256"), "'HS256'"),
        (lambda: "not-a-token", "not a JSON Web Token"),
    ],
)
def test_a_bad_token_is_refused_naming_the_claim(token: Any, message: str) -> None:
    with pytest.raises(SignInRefused, match=message):
        _backend().verify_token(token(), nonce="n1")
