"""Safe by default: an access token on every request, CSRF on every form, strict headers.

The token is made per launch and printed in the URL. The first request carrying it (``?token=``)
gets it back as an HttpOnly, SameSite=Strict cookie and is redirected to the same page without it,
so the token never stays in the address bar or a referrer. Every later request must carry the
cookie; anything else is refused with 403 before a route runs. Forms carry a CSRF value derived
from the token, and a POST whose ``Origin`` is another site is refused even with a valid cookie.
The content security policy allows only the app's own script and style files: an injected
``<script>`` would not run even if escaping failed.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "AccessGuard", "cookie_name", "csrf_value", "new_token"]

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def new_token() -> str:
    """Return a fresh access token (32 random bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def cookie_name(token: str) -> str:
    """Return the cookie's name for this launch (cookies ignore ports: two launches must differ).

    Args:
        token: The access token.
    """
    return "ownloop_ui_" + hashlib.sha256(token.encode()).hexdigest()[:12]


def csrf_value(token: str) -> str:
    """Return the CSRF value forms must carry: derived from the access token, not equal to it.

    Args:
        token: The access token.
    """
    return hmac.new(token.encode(), b"ownloop-ui-csrf", hashlib.sha256).hexdigest()


class AccessGuard:
    """ASGI middleware: refuse every request without the token; add the security headers.

    Args:
        app: The application it guards.
        token: The per-launch access token.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token
        self._cookie = cookie_name(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then pass it on with the headers added to the response."""
        if scope["type"] != "http":  # lifespan: nothing to guard
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        response = self._refusal(request)
        if response is not None:
            await _with_headers(response)(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(
                    (name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()
                )
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, send_with_headers)

    def _refusal(self, request: Request) -> Response | None:
        offered = request.query_params.get("token")
        if offered is not None:
            if not hmac.compare_digest(offered.encode(), self._token.encode()):
                return _forbidden()
            return self._enter(request.url)
        cookie = request.cookies.get(self._cookie, "")
        if not hmac.compare_digest(cookie.encode(), self._token.encode()):
            return _forbidden()
        if request.method == "POST" and not _same_origin(request):
            return PlainTextResponse("forbidden: cross-site request", status_code=403)
        return None

    def _enter(self, url: URL) -> Response:
        """Trade the token in the URL for a cookie, and drop it from the address."""
        query = urlencode([(key, value) for key, value in parse_qsl(url.query) if key != "token"])
        response = RedirectResponse(url.replace(query=query).path + (f"?{query}" if query else ""))
        response.status_code = 303
        response.set_cookie(
            self._cookie, self._token, httponly=True, samesite="strict", path="/", secure=False
        )
        return response

    def __repr__(self) -> str:
        return "AccessGuard(token=<hidden>)"


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin in {f"http://{host}", f"https://{host}"}


def _forbidden() -> Response:
    return PlainTextResponse(
        "forbidden: open the address `ownloop ui` printed (it carries this launch's access token)",
        status_code=403,
    )


def _with_headers(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response
