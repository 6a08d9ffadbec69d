"""Failed logins per address, across user names: password spraying (django-axes handler).

django-axes locks out one user name from one address after ``LOGIN_FAILURE_LIMIT`` wrong
passwords (``AXES_LOCKOUT_PARAMETERS``). Spraying, one password tried against many user names
from one address, never reaches that limit for any name. This handler adds a second rule:

1. When wrong passwords for ``LOGIN_ADDRESS_USERNAME_LIMIT`` different user names have come from
   one address within ``LOGIN_LOCKOUT_MINUTES``, that address may not log in as anyone: the login
   that reaches the limit and every later one answer the lockout page (429) saying so.
2. The window slides: the address is let in again once fewer names than the limit have failed
   from it within the last ``LOGIN_LOCKOUT_MINUTES`` (attempts refused meanwhile count as
   failures, as axes counts them: spraying on keeps it closed).
3. The limit is per address, not per name, so that a colleague's typos never lock anyone out:
   it is set well above the per-name limit, and 0 turns the rule off.

It reads axes' own ``AccessAttempt`` rows (one per user name, address and browser, with the time
of its last failure), so it shares their clean-up and ``accelboard axes_reset_ip``.
"""

from __future__ import annotations

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.models import AccessAttempt
from django.conf import settings
from django.utils import timezone


class LoginThrottleHandler(AxesDatabaseHandler):
    """axes' database handler, with the per-address rule of the module's docstring."""

    def is_locked(self, request: Any, credentials: dict[str, Any] | None = None) -> bool:
        return super().is_locked(request, credentials) or address_throttled(request)

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request, **kwargs)
        if (
            request is not None
            and not getattr(request, "axes_locked_out", False)
            and address_throttled(request)
        ):
            # The middleware answers the lockout page for this very attempt (and axes' lockout
            # page reads the credentials from here).
            request.axes_locked_out = True
            request.axes_credentials = credentials


def address_throttled(request: Any) -> bool:
    """Whether ``request``'s address has failed for the limit's number of user names within the
    window; marks the request (``accelboard_address_throttled``) for the lockout page."""
    limit = settings.LOGIN_ADDRESS_USERNAME_LIMIT
    address = getattr(request, "axes_ip_address", None)
    if not limit or not address:
        return False
    since = (getattr(request, "axes_attempt_time", None) or timezone.now()) - settings.AXES_COOLOFF_TIME
    names = (
        AccessAttempt.objects.filter(ip_address=address, attempt_time__gte=since)
        .values("username")
        .distinct()
        .count()
    )
    throttled = names >= limit
    if throttled:
        request.accelboard_address_throttled = True
    return throttled
