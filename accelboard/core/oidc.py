"""Single sign-on through an OpenID Connect provider: mozilla-django-oidc, set up from discovery.

The operator names the provider by its issuer URL (``ACCELBOARD_OIDC_ISSUER``); its endpoints
and keys come from ``<issuer>/.well-known/openid-configuration``, fetched once per process. The
flow is the authorization-code flow with PKCE and a nonce (mozilla-django-oidc's views). On the
way back:

1. The ID token must be signed with RS256 by a key in the provider's JWKS, name the configured
   issuer (``iss``) and this client (``aud``), be unexpired (``exp``) and carry this sign-in's
   ``nonce``; otherwise the sign-in is refused with a sentence naming the claim at fault.
2. The userinfo answer must be about the same subject (``sub``). The ID token's claims, then the
   userinfo's, are handed to ``sso_services.sso_sign_in``, which maps the groups claim to teams
   (or refuses, naming the claim) and writes the user and memberships in one transaction.

A refused sign-in comes back to the login page with the reason as an error message and leaves
nothing written. Nothing here runs while single sign-on is not configured: the backend answers
``None`` and the two views 404.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from .sso_mapping import GroupRule, MappingError, parse_group_mapping
from .sso_services import SignInRefused, sso_sign_in

logger = logging.getLogger(__name__)

SIGN_ALGORITHM = "RS256"
_DISCOVERY_KEYS = ("issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    client_secret: str
    groups_claim: str
    rules: tuple[GroupRule, ...]
    provider_name: str


def oidc_config() -> OidcConfig | None:
    """Single sign-on's settings, or None when ``ACCELBOARD_OIDC_ISSUER`` is unset.

    A mapping that does not parse raises ``MappingError``; the system checks report it at start.
    """
    issuer = str(getattr(settings, "OIDC_ISSUER", "") or "").rstrip("/")
    if not issuer:
        return None
    return OidcConfig(
        issuer=issuer,
        client_id=settings.OIDC_RP_CLIENT_ID,
        client_secret=settings.OIDC_RP_CLIENT_SECRET,
        groups_claim=settings.OIDC_GROUPS_CLAIM,
        rules=parse_group_mapping(settings.OIDC_GROUPS),
        provider_name=settings.OIDC_PROVIDER_NAME,
    )


def sign_in_offer() -> str | None:
    """The provider's name for the login page's button, or None when single sign-on is off."""
    name = str(getattr(settings, "OIDC_PROVIDER_NAME", "") or "")
    return name if getattr(settings, "OIDC_ISSUER", "") else None


_discovered: dict[str, dict[str, str]] = {}
_discovery_lock = threading.Lock()


def provider_metadata(issuer: str) -> dict[str, str]:
    """The provider's discovery document (its endpoints), fetched once per process and issuer."""
    with _discovery_lock:
        if issuer in _discovered:
            return _discovered[issuer]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise SignInRefused(
            f"The sign-in provider did not answer its discovery document ({url}): {type(exc).__name__}; "
            "try again later."
        ) from None
    missing = [key for key in _DISCOVERY_KEYS if not isinstance(document.get(key), str)]
    if missing:
        raise SignInRefused(f"The provider's discovery document ({url}) lacks {', '.join(missing)}.")
    if document["issuer"].rstrip("/") != issuer:
        raise SignInRefused(
            f"The provider's discovery document names issuer {document['issuer']!r}, "
            f"not ACCELBOARD_OIDC_ISSUER {issuer!r}."
        )
    metadata = {key: document[key] for key in _DISCOVERY_KEYS}
    with _discovery_lock:
        _discovered[issuer] = metadata
    return metadata


class OidcBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with endpoints from discovery and every ID token claim checked."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The base reads endpoints from settings here; they come from discovery, per sign-in.
        from django.contrib.auth import get_user_model

        self.UserModel = get_user_model()
        self.config: OidcConfig | None = None

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        config = oidc_config()
        if config is None or request is None or "nonce" not in kwargs:
            return None  # a password sign-in, or single sign-on is off
        try:
            metadata = provider_metadata(config.issuer)
            self.config = config
            self.OIDC_OP_TOKEN_ENDPOINT = metadata["token_endpoint"]
            self.OIDC_OP_USER_ENDPOINT = metadata["userinfo_endpoint"]
            self.OIDC_OP_JWKS_ENDPOINT = metadata["jwks_uri"]
            self.OIDC_RP_CLIENT_ID = config.client_id
            self.OIDC_RP_CLIENT_SECRET = config.client_secret
            self.OIDC_RP_SIGN_ALGO = SIGN_ALGORITHM
            self.OIDC_RP_IDP_SIGN_KEY = None
            return super().authenticate(request, **kwargs)
        except SignInRefused as exc:
            reason = str(exc)
        except requests.RequestException as exc:
            reason = f"The sign-in provider did not answer ({type(exc).__name__}); try again later."
        logger.warning("single sign-on refused: %s", reason)
        request.sso_refusal = reason  # type: ignore[attr-defined]  # read by the callback view
        return None

    def verify_token(self, token: Any, **kwargs: Any) -> dict[str, Any]:
        """The ID token's claims, once its signature, issuer, audience, expiry and nonce hold."""
        assert self.config is not None
        if not isinstance(token, str) or not token:
            raise SignInRefused("The provider's token answer carries no ID token ('id_token').")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise SignInRefused("The provider's ID token is not a JSON Web Token.") from None
        if header.get("alg") != SIGN_ALGORITHM:
            raise SignInRefused(
                f"The ID token is signed with {header.get('alg')!r}; accelboard accepts RS256."
            )
        try:
            key = self.retrieve_matching_jwk(token)
        except (SuspiciousOperation, KeyError, jwt.PyJWTError):
            raise SignInRefused(
                "No key in the provider's JWKS matches the ID token's 'kid'; sign-in refused."
            ) from None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[SIGN_ALGORITHM],
                audience=self.config.client_id,
                issuer=self.config.issuer,
                leeway=60,
                options={"require": ["iss", "aud", "exp", "sub"]},
            )
        except jwt.InvalidSignatureError:
            raise SignInRefused(
                "The ID token's signature does not verify against the provider's published keys; "
                "sign-in refused."
            ) from None
        except jwt.ExpiredSignatureError:
            raise SignInRefused("The ID token has expired (its 'exp' claim is past).") from None
        except jwt.InvalidIssuerError:
            raise SignInRefused(
                f"The ID token's 'iss' claim is not the configured issuer {self.config.issuer}."
            ) from None
        except jwt.InvalidAudienceError:
            raise SignInRefused(
                f"The ID token's 'aud' claim does not name this client ({self.config.client_id})."
            ) from None
        except jwt.MissingRequiredClaimError as exc:
            raise SignInRefused(f"The ID token has no {exc.claim!r} claim.") from None
        except jwt.PyJWTError as exc:
            raise SignInRefused(f"The ID token cannot be verified: {exc}.") from None
        if "nonce" in kwargs and claims.get("nonce") != kwargs["nonce"]:
            raise SignInRefused("The ID token's 'nonce' claim does not match this sign-in; start again.")
        return claims

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        assert self.config is not None
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if not isinstance(userinfo, dict) or userinfo.get("sub") != payload.get("sub"):
            raise SignInRefused("The provider's userinfo answer is about another 'sub' than the ID token.")
        return sso_sign_in(
            issuer=self.config.issuer,
            claims={**userinfo, **payload},
            groups_claim=self.config.groups_claim,
            rules=self.config.rules,
            now=timezone.now(),
        )

    def get_user(self, user_id: int) -> AbstractBaseUser | None:
        # Django's: a user deactivated since signing in is signed out (the base skips that).
        return ModelBackend.get_user(self, user_id)


def _configured() -> OidcConfig:
    try:
        config = oidc_config()
    except MappingError:
        config = None
    if config is None:
        raise Http404("single sign-on is not configured")
    return config


class SignInStart(OIDCAuthenticationRequestView):
    """``/oidc/authenticate/``: off to the provider's authorization endpoint."""

    def __init__(self, **kwargs: Any) -> None:
        super(OIDCAuthenticationRequestView, self).__init__(**kwargs)  # View's: no settings read

    def get(self, request: HttpRequest) -> HttpResponse:
        config = _configured()
        try:
            metadata = provider_metadata(config.issuer)
        except SignInRefused as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(resolve_url(settings.LOGIN_URL))
        self.OIDC_OP_AUTH_ENDPOINT = metadata["authorization_endpoint"]
        self.OIDC_RP_CLIENT_ID = config.client_id
        response: HttpResponse = super().get(request)
        return response


class SignInCallback(OIDCAuthenticationCallbackView):
    """``/oidc/callback/``: the provider's answer; on refusal, the login page with the reason."""

    def get(self, request: HttpRequest) -> HttpResponse:
        config = _configured()
        self.provider_name = config.provider_name
        response: HttpResponse = super().get(request)
        return response

    def login_failure(self) -> HttpResponse:
        request = self.request
        reason = getattr(request, "sso_refusal", None)
        if reason is None and request.GET.get("error"):
            detail = request.GET.get("error_description") or request.GET["error"]
            reason = f"{self.provider_name} refused the sign-in: {detail[:200]}"
        messages.error(request, reason or f"Sign-in through {self.provider_name} failed; please start again.")
        return HttpResponseRedirect(resolve_url(settings.LOGIN_URL))
