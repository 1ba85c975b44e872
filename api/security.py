"""Bearer-token authentication for the whole HTTP API (docs/interface.md, Configuration: `--api-token`).

One ASGI middleware wraps the app, so every route, mount and page added later is covered; only
the probes and the Prometheus endpoint stay open. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
SCHEME = "bearer"
DETAIL_SCHEMA = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
UNAUTHORIZED = {
    "description": "missing or wrong bearer token (`WWW-Authenticate: Bearer`)",
    "content": {"application/json": {"schema": DETAIL_SCHEMA}},
}


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return b""


class BearerAuth:
    """Answers 401 (`WWW-Authenticate: Bearer`, `{"detail": ...}`) unless the request carries
    `Authorization: Bearer TOKEN`; paths in `open_paths` need nothing."""

    def __init__(self, app: ASGIApp, *, token: str, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self._open:
            await self.app(scope, receive, send)
            return
        if hmac.compare_digest(_header(scope, b"authorization"), self._expected):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        given = bool(_header(scope, b"authorization"))
        detail = "wrong bearer token" if given else "missing bearer token: send Authorization: Bearer TOKEN"
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="rca"' + (b', error="invalid_token"' if given else b"")),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _documented(openapi: Callable[[], dict[str, Any]], open_paths: frozenset[str]) -> Callable[[], dict[str, Any]]:
    """The OpenAPI description with the bearer scheme required everywhere but `open_paths`."""

    def schema() -> dict[str, Any]:
        document = openapi()
        document.setdefault("components", {}).setdefault("securitySchemes", {})[SCHEME] = {
            "type": "http",
            "scheme": "bearer",
            "description": "the token given to rca serve with --api-token",
        }
        document["security"] = [{SCHEME: []}]
        for path, operations in document.get("paths", {}).items():
            for operation in operations.values():
                if path in open_paths:
                    operation["security"] = []
                else:
                    operation.setdefault("responses", {})["401"] = UNAUTHORIZED
        return document

    return schema


def require_token(app: FastAPI, token: str | None) -> None:
    """Puts `BearerAuth` in front of the whole app when a token is set (no-op otherwise)."""
    if not token:
        return
    app.add_middleware(BearerAuth, token=token)
    app.openapi = _documented(app.openapi, OPEN_PATHS)  # type: ignore[method-assign]
