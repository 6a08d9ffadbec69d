"""A real OpenID Connect provider on loopback for the single sign-on tests: django-oauth-toolkit.

Run as a separate process (its own Django, settings and SQLite database, nothing shared with
accelboard)::

    python -m tests.oidc_provider --db /tmp/op.sqlite3 --client-id accelboard --client-secret s \
        --redirect-uri http://testserver/oidc/callback/ \
        --users '[{"username": "ada", "password": "pw", "email": "ada@example.org", "groups": ["perf-llm"]}]'

It binds a free port on 127.0.0.1 and prints one line, ``issuer=http://127.0.0.1:PORT/o``; the
discovery document is at ``<issuer>/.well-known/openid-configuration``. Users sign in on its
own login page (``/accounts/login/``, fields ``username`` and ``password``); the client skips the
consent page. The ``groups`` claim (in the ID token and the userinfo answer) lists the user's
Django groups there.

``--tamper`` makes it a provider whose ID tokens do not verify: after signing, the token's claims
are altered (an extra group), so its signature no longer matches, as a token forged on the way
would look.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

LOGIN_PAGE = """<!doctype html><title>Test identity provider</title>
<h1>Test identity provider</h1>
{% if form.errors %}<p id="op-error">Wrong user name or password.</p>{% endif %}
<form method="post">{% csrf_token %}
<label>User <input id="op-username" name="username"></label>
<label>Password <input id="op-password" name="password" type="password"></label>
<input type="hidden" name="next" value="{{ next }}">
<button id="op-submit" type="submit">Sign in</button></form>"""


def _tamper(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["groups"] = [*claims.get("groups", []), "admins"]
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def _configure(args: argparse.Namespace) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    settings.configure(
        DEBUG=False,
        SECRET_KEY="test-provider-" + "x" * 40,
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "oauth2_provider",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": args.db}},
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "OPTIONS": {
                    "loaders": [("django.template.loaders.locmem.Loader", {"login.html": LOGIN_PAGE})],
                    "context_processors": ["django.template.context_processors.request"],
                },
            }
        ],
        LOGIN_URL="/accounts/login/",
        # Cookies are per host, not per port: beside accelboard on 127.0.0.1, the provider's own
        # names keep the two sessions apart (as two hosts would in real life).
        SESSION_COOKIE_NAME="op_sessionid",
        CSRF_COOKIE_NAME="op_csrftoken",
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        OAUTH2_PROVIDER={
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": pem,
            "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email"},
            "OAUTH2_VALIDATOR_CLASS": f"{__name__}.GroupsValidator",
            "PKCE_REQUIRED": True,
        },
        PROVIDER_TAMPER=args.tamper,
    )


def _validator_class() -> type:
    from oauth2_provider.oauth2_validators import OAuth2Validator

    class GroupsValidator(OAuth2Validator):
        # Every claim below in every answer, whatever the scopes: the test decides what is sent.
        oidc_claim_scope = None

        def get_additional_claims(self, request: Any) -> dict[str, Any]:
            user = request.user
            return {
                "preferred_username": user.username,
                "email": user.email,
                "groups": sorted(user.groups.values_list("name", flat=True)),
            }

        def finalize_id_token(self, id_token: Any, token: Any, token_handler: Any, request: Any) -> str:
            signed = super().finalize_id_token(id_token, token, token_handler, request)
            return _tamper(signed) if settings.PROVIDER_TAMPER else signed

    return GroupsValidator


def _seed(args: argparse.Namespace) -> None:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    for spec in json.loads(args.users):
        user = User.objects.create_user(
            spec["username"], email=spec.get("email", ""), password=spec["password"]
        )
        for name in spec.get("groups", []):
            user.groups.add(Group.objects.get_or_create(name=name)[0])
    Application.objects.create(
        name="accelboard",
        client_id=args.client_id,
        client_secret=args.client_secret,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(args.redirect_uri),
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--redirect-uri", action="append", required=True)
    parser.add_argument("--users", required=True, help="JSON list of {username, password, email, groups}")
    parser.add_argument("--tamper", action="store_true")
    args = parser.parse_args(argv)
    Path(args.db).unlink(missing_ok=True)
    _configure(args)
    import django

    django.setup()
    _seed(args)

    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
            pass

    server = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler)
    server.set_app(get_wsgi_application())
    print(f"issuer=http://127.0.0.1:{server.server_port}/o", flush=True)
    server.serve_forever()


def __getattr__(name: str) -> Any:
    # Django imports the validator class and URLconf by dotted path, after settings are configured.
    if name == "GroupsValidator":
        return _validator_class()
    if name == "urlpatterns":
        from django.contrib.auth import views as auth_views
        from django.urls import include, path

        return [
            path("accounts/login/", auth_views.LoginView.as_view(template_name="login.html")),
            path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
        ]
    raise AttributeError(name)


if __name__ == "__main__":
    main(sys.argv[1:])
