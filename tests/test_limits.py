"""Request bodies beyond the bound are answered 413 with a message and never reach a handler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.limits import DEFAULT_MAX_BODY_BYTES
from tests.apiapp import api_app
from tests.conftest import Server

LIMIT = 64 * 1024
JSON = {"content-type": "application/json"}


def _webhook(alerts: int, padding: int = 0) -> dict[str, object]:
    return {
        "version": "4",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "HighLatency", "service": f"svc-{i}"},
                "annotations": {"summary": "x" * padding},
                "startsAt": "2026-01-05T02:00:00Z",
                "fingerprint": f"fp{i:06d}",
            }
            for i in range(alerts)
        ],
    }


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    with api_app(tmp_path / "limits.db", max_body_bytes=LIMIT) as (application, _):
        yield application


def test_declared_oversize_body_is_413_with_a_message(app: FastAPI) -> None:
    body = json.dumps(_webhook(1, padding=LIMIT)).encode()
    response = TestClient(app).post("/webhooks/alertmanager", content=body, headers=JSON)
    assert response.status_code == 413
    assert response.json() == {"detail": f"request body exceeds {LIMIT} bytes"}
    assert TestClient(app).get("/incidents").json() == {"incidents": []}  # nothing stored


def test_streamed_oversize_body_without_length_is_413(app: FastAPI) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(LIMIT // 1024 + 1):
            yield b" " * 1024

    response = TestClient(app).post("/webhooks/alertmanager", content=chunks())
    assert response.status_code == 413
    assert "exceeds" in response.json()["detail"]


def test_bodies_within_the_bound_reach_the_handler(app: FastAPI) -> None:
    body = json.dumps(_webhook(3, padding=LIMIT // 8)).encode()
    assert len(body) < LIMIT
    response = TestClient(app).post("/webhooks/alertmanager", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    assert sum(i["alerts"] for i in response.json()["incidents"]) == 3
    empty = TestClient(app).post("/webhooks/alertmanager", content=b"", headers=JSON)
    assert empty.status_code == 422  # an empty body is still the handler's to judge


def test_serve_refuses_a_large_webhook_and_keeps_serving(server: Server) -> None:
    body = json.dumps(_webhook(1, padding=DEFAULT_MAX_BODY_BYTES)).encode()
    url = f"{server.api}/webhooks/alertmanager"
    response = httpx.post(url, content=body, headers=JSON, timeout=30)
    assert response.status_code == 413
    assert str(DEFAULT_MAX_BODY_BYTES) in response.json()["detail"]
    ok = httpx.post(url, json=_webhook(2), timeout=30)
    assert ok.status_code == 200, ok.text
    assert httpx.get(f"{server.api}/healthz", timeout=10).status_code == 200
