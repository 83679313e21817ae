"""The desk's web app (Starlette): server-rendered pages of a :class:`Store`, a server-sent
events stream of the board's changes, ``/healthz`` and ``/metrics``.

Every feed-supplied string is untrusted: the templates are Jinja2 with autoescape on, links are
only http(s) (:func:`newsflow.digest.render.safe_url`; others are shown as text), no feed HTML is
rendered as HTML, and every response carries a Content-Security-Policy without inline scripts
(the page's one script is ``/static/desk.js``, which writes feed strings with ``textContent``).
With a token (required off loopback: ``docs/desk.md``) every request must carry it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from newsflow.digest.render import to_html
from newsflow.serve.store import Filters, Store, profile_of

CSP = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
TOKEN_COOKIE = "newsflow_token"
TOKEN_HEADER = "x-newsflow-token"
#: how often an open stream looks for changes, and sends a comment to keep idle proxies open
SSE_POLL_S = 0.25
SSE_KEEPALIVE_S = 15.0
#: the cards a board shows (the best ranked; the filters reach the others)
BOARD_MAX = 300
_STYLE = re.compile(r"<style>(.*?)</style>", re.DOTALL)

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def fmt_time(iso: Any) -> str:
    """``2026-03-02T06:00:00Z`` -> ``2026-03-02 06:00 UTC`` (the same as desk.js's ``fmtTime``).

    >>> fmt_time("2026-03-02T06:00:00.123Z"), fmt_time(None)
    ('2026-03-02 06:00 UTC', '')
    """
    s = str(iso or "")
    return f"{s[:10]} {s[11:16]} UTC" if len(s) >= 16 else s


def style_csp(page: str) -> str:
    """The CSP of a rendered digest page: its own inline stylesheet allowed by its hash."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(m.encode()).digest()).decode()}'"
                      for m in _STYLE.findall(page))
    return f"{CSP}; style-src 'self' {hashes}" if hashes else CSP


def environment() -> Environment:
    env = Environment(loader=PackageLoader("newsflow.serve", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["t"] = fmt_time
    env.filters["trends"] = trends
    env.filters["tops"] = tops
    env.filters["profile"] = profile_of
    return env


def _items(d: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for sec in d.get("sections") or []:
        for it in sec.get("items") or []:
            yield str(sec.get("name") or ""), it


def trends(d: Mapping[str, Any]) -> dict[str, int]:
    """A digest's trend indicators: items per trend (EMERGING, TRENDING, FADING).

    >>> trends({"sections": [{"name": "Top Stories", "items": [{"trend": "EMERGING"}, {"trend": None}]}]})
    {'EMERGING': 1}
    """
    out: dict[str, int] = {}
    for _, it in _items(d):
        if it.get("trend"):
            out[str(it["trend"])] = out.get(str(it["trend"]), 0) + 1
    return out


def tops(d: Mapping[str, Any], n: int = 3) -> list[str]:
    """The labels of a digest's first ``n`` top stories."""
    return [str(it.get("label") or "") for name, it in _items(d) if name == "Top Stories"][:n]


class Guard:
    """ASGI middleware: security headers on every response, and the token check.

    The token is accepted from the ``X-Newsflow-Token`` header, the cookie, or ``?token=`` (which
    sets the cookie and redirects to the same address without it, so it leaves the address bar).
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    def _ok(self, given: str | None) -> bool:
        return given is not None and self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-security-policy"]
                csp = dict(message.get("headers", [])).get(b"content-security-policy", CSP.encode())
                headers += [(b"content-security-policy", csp), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": headers}
            await send(message)

        if self.token is not None:
            req = Request(scope)
            query = req.query_params.get("token")
            if self._ok(query):
                rest = urlencode([(k, v) for k, v in parse_qsl(req.url.query) if k != "token"])
                path = "/" + req.url.path.lstrip("/")  # (never "//host": a redirect off the desk)
                resp: Response = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
                resp.set_cookie(TOKEN_COOKIE, str(self.token), httponly=True, samesite="strict")
                await resp(scope, receive, send_with_headers)
                return
            if not (self._ok(req.headers.get(TOKEN_HEADER)) or self._ok(req.cookies.get(TOKEN_COOKIE))):
                await PlainTextResponse("a token is required (see docs/desk.md)\n", status_code=401)(
                    scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)


def _metrics(store: Store, extra: Callable[[], float | None]) -> CollectorRegistry:
    reg = CollectorRegistry()
    def count(name: str) -> Callable[[], float]:
        return lambda: float(store.counts()[name])

    for name in ("stories", "articles", "digests", "feeds"):
        Gauge(f"newsflow_serve_{name}", f"{name} the desk holds", registry=reg).set_function(count(name))
    Gauge("newsflow_serve_records", "records applied since the start", registry=reg).set_function(
        lambda: store.counts()["records"])
    Gauge("newsflow_serve_version", "changes applied (the version a page asks changes after)",
          registry=reg).set_function(lambda: store.version)
    Gauge("newsflow_serve_record_lag_seconds", "age of the last record read from Kafka when applied",
          registry=reg).set_function(lambda: (extra() or 0.0) / 1000)
    return reg


def create_app(store: Store, *, token: str | None = None, source: str = "",
               lag_ms: Callable[[], float | None] = lambda: None) -> ASGIApp:
    """The desk on ``store``; ``source`` is shown in the page footer (a directory, brokers)."""
    env = environment()
    registry = _metrics(store, lag_ms)

    def page(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        counts = store.counts()
        return HTMLResponse(env.get_template(name).render(clock=store.clock, source=source, counts=counts, **ctx),
                            status_code=status)

    async def board(request: Request) -> Response:
        f = Filters.of(request.query_params)
        version = store.version  # (read before the cards: a change in between is sent again)
        found = store.matching(f)
        cards = found[:BOARD_MAX]
        events = "/events" + (f"?{urlencode(f.query())}" if f.query() else "")
        return page("board.html", cards=cards, total=len(found), f=f, facets=store.facets(), version=version, events=events,
                    blank={"id": "", "label": "", "phase": "", "importance": 0.0, "lead_title": "",
                           "lead_url": None, "publishers": [], "timeline": []})

    async def events(request: Request) -> Response:
        f = Filters.of(request.query_params)
        try:
            since = int(request.headers.get("last-event-id") or request.query_params.get("since") or 0)
        except ValueError:
            since = 0

        async def stream() -> AsyncIterator[bytes]:
            nonlocal since
            yield b"retry: 1000\n\n"
            idle = 0.0
            while True:
                v = store.version
                if v > since:
                    changed = set(store.changes_since(since))
                    if changed:
                        found = store.matching(f)
                        cards = found[:BOARD_MAX]
                        data = {"version": v, "order": [c["id"] for c in cards], "total": len(found),
                                "cards": [c for c in cards if c["id"] in changed]}
                        yield b"event: board\nid: %d\ndata: %s\n\n" % (v, orjson.dumps(data))
                        idle = 0.0
                    since = v
                await asyncio.sleep(SSE_POLL_S)
                idle += SSE_POLL_S
                if idle >= SSE_KEEPALIVE_S:
                    yield b": keep-alive\n\n"
                    idle = 0.0

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

    async def story(request: Request) -> Response:
        sid = str(request.path_params["sid"])
        now = store.resolve(sid)
        if now != sid:
            return RedirectResponse(f"/story/{now}", status_code=302)
        s = store.story(sid)
        if s is None:
            return page("missing.html", status=404, what="story", ident=sid)
        return page("story.html", s=s)

    async def digests(request: Request) -> Response:
        latest, closed, archive = store.digests()
        return page("digests.html", latest=latest, closed=closed, archive=archive)

    async def digest(request: Request) -> Response:
        d = store.digest(str(request.path_params["digest_id"]))
        if d is None:
            return page("missing.html", status=404, what="digest", ident=request.path_params["digest_id"])
        html = to_html(d)
        return HTMLResponse(html, headers={"content-security-policy": style_csp(html)})

    async def feeds(request: Request) -> Response:
        return page("feeds.html", feeds=store.feeds())

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", **store.counts(), "version": store.version, "clock": store.clock})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    app = Starlette(routes=[
        Route("/", board), Route("/events", events), Route("/story/{sid}", story),
        Route("/digests", digests), Route("/digests/{digest_id:path}", digest), Route("/feeds", feeds),
        Route("/healthz", healthz), Route("/metrics", metrics),
        Mount("/static", StaticFiles(packages=[("newsflow.serve", "static")]), name="static"),
    ])
    return Guard(app, token)
