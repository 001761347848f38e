"""The review app: a Starlette application serving the page and its JSON API on 127.0.0.1.

Who may use it. The server listens on the loopback interface only (`cli/review.py` binds it), and
every request must name the app's own host (`127.0.0.1:PORT` or `localhost:PORT`), which turns
away a page on another site that rebinds its DNS name to 127.0.0.1. Every API request carries the
access token (`X-Evaltrace-Token`, random per start, printed in the URL's fragment). A write
(`POST /api/labels`) must also come from the app's own origin (`Origin`, or without it
`Sec-Fetch-Site: same-origin`) as JSON: a form or a page elsewhere cannot label, even with the token.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.review.data import Filters, ReviewData
from evaltrace.evaluators.results.review.page import CSP, PAGE
from evaltrace.evaluators.results.store.labels import Label, read_labels, write_labels

TOKEN_HEADER = "x-evaltrace-token"
MAX_BODY = 64 * 1024
"""Bytes a label write may send (a note is short text)."""
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Access:
    """What a request must show: the app's port (for its host and origin) and the token."""

    port: int
    token: str
    author: str

    @property
    def hosts(self) -> tuple[str, ...]:
        """The Host header values of the app itself."""
        return (f"127.0.0.1:{self.port}", f"localhost:{self.port}")

    def refusal(self, request: Request, *, api: bool, write: bool) -> Response | None:
        """Why `request` is refused (a 403/421 response), or `None` when it may go on."""
        if request.headers.get("host", "") not in self.hosts:
            return _error(421, "this server answers only to its own address")
        if api and not secrets.compare_digest(request.headers.get(TOKEN_HEADER, "").encode(), self.token.encode()):
            return _error(403, "missing or wrong access token (open the URL evaltrace review printed)")
        if write and not self._same_origin(request):
            return _error(403, "writes are accepted from the review page itself only")
        if write and request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _error(415, "a write is a JSON body")
        return None

    def _same_origin(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is not None:
            return origin in {f"http://{host}" for host in self.hosts}
        return request.headers.get("sec-fetch-site") == "same-origin"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=_HEADERS)


def _json(data: Any) -> JSONResponse:
    return JSONResponse(data, headers=_HEADERS)


def create_app(data: ReviewData, access: Access) -> Starlette:
    """The app: `GET /` the page; `GET /api/sources|entries|entry`; `POST /api/labels`."""

    def guarded(handler: Handler, *, api: bool = True, write: bool = False) -> Handler:
        async def run(request: Request) -> Response:
            refused = access.refusal(request, api=api, write=write)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except InputError as exc:
                return _error(400, str(exc))

        return run

    async def page(request: Request) -> Response:
        return Response(PAGE, media_type="text/html; charset=utf-8", headers=_HEADERS)

    async def sources(request: Request) -> Response:
        return _json({"sources": data.sources()})

    async def entries(request: Request) -> Response:
        q = request.query_params
        filters = Filters(q.get("failed") == "1", q.get("scorer", ""), q.get("case", ""), q.get("tier", ""))
        return _json({"entries": data.entries(q.get("source", ""), filters)})

    async def entry(request: Request) -> Response:
        index = request.query_params.get("index", "")
        if not index.isdigit():
            raise InputError("index: a whole number")
        return _json(data.entry(request.query_params.get("source", ""), int(index)))

    async def label(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY:
            return _error(413, f"a label is at most {MAX_BODY} bytes")
        given = _parse_label(body)
        data.check_label(given)
        write_labels(data.store, [given], author=access.author)
        stored = next(item for item in read_labels(data.store) if item.key == given.key)  # the latest per key
        return _json({"label": stored.model_dump(mode="json")})

    return Starlette(
        routes=[
            Route("/", guarded(page, api=False), methods=["GET"]),
            Route("/api/sources", guarded(sources), methods=["GET"]),
            Route("/api/entries", guarded(entries), methods=["GET"]),
            Route("/api/entry", guarded(entry), methods=["GET"]),
            Route("/api/labels", guarded(label, write=True), methods=["POST"]),
        ]
    )


def _parse_label(body: bytes) -> Label:
    try:
        raw = json.loads(body)
        if not isinstance(raw, dict):
            raise InputError("a label is a JSON object")
        fields = {k: raw.get(k) for k in ("case_id", "trace_id", "scorer", "label", "note", "run_id")}
        return Label.model_validate(
            {k: v for k, v in fields.items() if v is not None} | {"author": "", "labelled_at": None}
        )
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("a label is a JSON object") from None
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise InputError(f"label: {'.'.join(map(str, problem['loc']))}: {problem['msg']}") from None
