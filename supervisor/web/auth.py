"""Who may see the dashboard: the token, the Host check, the Origin check.

* The token is 32 random bytes (URL-safe base64) kept in ``[web] token_file``
  (under the state directory, mode 0600, written atomically), made on first
  use, so a bookmarked URL keeps working across daemon restarts.  Delete the
  file to get a new one (the next start of the web server makes it).
* A request carries it as ``?token=`` (once: the answer sets a cookie and
  redirects to the same page without it, as Jupyter does), as the cookie, or
  as ``Authorization: Bearer TOKEN`` (scripts, Prometheus).  Without it: 401.
* On a loopback ``listen``, a request whose ``Host`` is not a loopback name is
  refused (403): a web page on another site cannot reach the dashboard
  through DNS rebinding.
* An action (every POST) needs the token and, when a browser sent it
  (``Origin``, or the cookie as the only credential), an ``Origin`` equal to
  the dashboard's own: a page on another origin cannot make one (403).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from ..config.web import is_loopback
from ..durable import atomic_write

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Headers on every answer: no framing, no sniffing, no referrer (a first URL holds the token).
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                                "base-uri 'none'; form-action 'self'"),
    "Cache-Control": "no-store",
}


def load_token(path: Path) -> str:
    """The token in ``path``, made (0600, atomically) when the file is missing or empty."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if token:
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
        return token
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, token + "\n", mode=0o600)
    return token


def cookie_name(port: int) -> str:
    """Cookies are shared by every port of a host: one name per port, so two daemons do not clash."""
    return f"agentd_token_{port}"


class Guard:
    """The checks above, as an aiohttp middleware (:meth:`middleware`)."""

    def __init__(self, token: str, loopback: bool, metrics_public: bool, port: int) -> None:
        self.token = token
        self.loopback = loopback
        self.metrics_public = metrics_public and loopback
        self.port = port

    def _valid(self, candidate: str | None) -> bool:
        return bool(candidate) and hmac.compare_digest(candidate.encode(), self.token.encode())  # type: ignore[union-attr]

    def credential(self, request: web.Request) -> str | None:
        """How the request proved it has the token: "query", "header", "cookie", or None."""
        auth = request.headers.get("Authorization", "")
        if auth.lower().startswith("bearer ") and self._valid(auth[7:].strip()):
            return "header"
        if self._valid(request.query.get("token")):
            return "query"
        if self._valid(request.cookies.get(cookie_name(self.port))):
            return "cookie"
        return None

    def host_ok(self, request: web.Request) -> bool:
        if not self.loopback:
            return True
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        return is_loopback(host)

    def origin_ok(self, request: web.Request, credential: str) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:
            # A browser always sends Origin with a POST; only a script using the header may omit it.
            return credential == "header"
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc == request.host

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.host_ok(request):
            return _refuse(request, 403, f"Host {request.host!r} is not a loopback name: refused "
                                         "(use http://127.0.0.1:PORT/ or http://localhost:PORT/)")
        public = self.metrics_public and request.path == "/metrics" and request.method == "GET"
        credential = self.credential(request)
        if credential is None and not public:
            return _refuse(request, 401, "this page needs the dashboard's token: run `agentd web` for its URL")
        if request.method not in ("GET", "HEAD"):
            if credential is None or not self.origin_ok(request, credential):
                return _refuse(request, 403, "refused: an action must come from the dashboard's own page "
                                             "(another Origin, or no Origin with a cookie)")
        if credential == "query" and request.method == "GET" and not request.path.startswith("/api/"):
            # Keep the token out of the address bar, history and logs: a cookie from now on.
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.rel_url.with_query(query)
            response: web.StreamResponse = web.Response(status=302, headers={"Location": str(target)})
            response.set_cookie(cookie_name(self.port), self.token, httponly=True, samesite="Strict", path="/")
        else:
            response = await handler(request)
        return response


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the headers above on every answer, errors and streams included."""
    for key, value in SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)


def _refuse(request: web.Request, status: int, text: str) -> web.Response:
    if request.path.startswith("/api/") or request.path == "/metrics" or "json" in request.headers.get("Accept", ""):
        return web.json_response({"error": text}, status=status)
    return web.Response(status=status, text=text + "\n", content_type="text/plain")
