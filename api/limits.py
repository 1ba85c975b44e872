"""A request body bound for every endpoint of the HTTP API.

The body is read (at most `max_bytes` of it) before the app sees the request: a declared or
streamed body beyond the bound is answered 413 with a message and never reaches a handler.
Alertmanager webhooks are small (kilobytes per alert group), so 1 MiB leaves ample room.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.security import DETAIL_SCHEMA

DEFAULT_MAX_BODY_BYTES = 1 << 20
METHODS_WITH_BODIES = frozenset({"post", "put", "patch"})


async def _too_large(send: Send, max_bytes: int) -> None:
    body = json.dumps({"detail": f"request body exceeds {max_bytes} bytes"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"content-length":
            text = bytes(value).strip()
            return int(text) if text.isdigit() else None
    return None


class BodyLimit:
    """Answers 413 `{"detail": ...}` to HTTP requests whose body exceeds `max_bytes`."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _too_large(send, self.max_bytes)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: let the app see it
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _too_large(send, self.max_bytes)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([whole], receive), send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands out the buffered messages first, then defers to the real one."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _documented(openapi: Callable[[], dict[str, Any]], max_bytes: int) -> Callable[[], dict[str, Any]]:
    """The OpenAPI description with the 413 on every operation that takes a body."""
    too_large = {
        "description": f"request body over {max_bytes} bytes",
        "content": {"application/json": {"schema": DETAIL_SCHEMA}},
    }

    def schema() -> dict[str, Any]:
        document = openapi()
        for operations in document.get("paths", {}).values():
            for method, operation in operations.items():
                if method in METHODS_WITH_BODIES:
                    operation.setdefault("responses", {})["413"] = too_large
        return document

    return schema


def limit_bodies(app: FastAPI, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Puts `BodyLimit` in front of the app and documents its 413."""
    app.add_middleware(BodyLimit, max_bytes=max_bytes)
    app.openapi = _documented(app.openapi, max_bytes)  # type: ignore[method-assign]
