"""`--api-token`: bearer auth on every API route but the probes and /metrics, and on both OTLP
receivers; the loud warning when listening beyond loopback without a token."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from starlette.routing import Mount, Route

from api.app import create_app
from api.security import OPEN_PATHS
from rca.app.compose import serve
from rca.app.config import HostPort, Settings
from rca.graph.service_graph import ServiceGraph
from rca.graph.writer import GraphWriter
from tests.apiapp import api_app
from tests.conftest import Server, start_server, stop_server
from tests.spanfactory import request, sid, span

TOKEN = "s3cret-token"
METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    with api_app(tmp_path / "auth.db", api_token=TOKEN) as (application, _):
        yield application


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def _requests(app: FastAPI) -> set[tuple[str, str]]:
    """(method, concrete path) for every documented operation, top-level route and mount, whoever added it."""
    found = {(m.upper(), _concrete(p)) for p, ops in app.openapi()["paths"].items() for m in ops}
    for route in app.routes:
        if isinstance(route, Route):
            found |= {(m, _concrete(route.path)) for m in route.methods or {"GET"} if m != "HEAD"}
        elif isinstance(route, Mount):
            found.add(("GET", f"{route.path}/anything"))
    return found


def test_every_route_but_the_open_ones_needs_the_token(app: FastAPI) -> None:
    client = TestClient(app)
    routes = _requests(app)
    assert {("POST", "/webhooks/alertmanager"), ("GET", "/graph"), ("GET", "/docs"), ("GET", "/openapi.json")} <= routes
    for method, path in sorted(routes):
        if path in OPEN_PATHS:
            continue
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}, {"authorization": "Basic x"}):
            response = client.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (method, path, headers)
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert response.json()["detail"]
        authorized = client.request(method, path, headers={"authorization": f"Bearer {TOKEN}"}, json={})
        assert authorized.status_code != 401, (method, path)


def test_probes_and_metrics_stay_open(app: FastAPI) -> None:
    client = TestClient(app)
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/metrics").status_code != 401  # 404 until /metrics exists, never 401


def test_openapi_documents_the_bearer_scheme(app: FastAPI) -> None:
    schema = TestClient(app).get("/openapi.json", headers={"authorization": f"Bearer {TOKEN}"}).json()
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "the token given to rca serve with --api-token",
    }
    assert schema["security"] == [{"bearer": []}]
    assert schema["paths"]["/healthz"]["get"]["security"] == []


def test_no_token_means_no_auth(tmp_path: Path) -> None:
    writer = GraphWriter(ServiceGraph())
    try:
        client = TestClient(create_app(writer))
        assert client.get("/graph").status_code == 200
        assert "securitySchemes" not in client.get("/openapi.json").json().get("components", {})
    finally:
        writer.close()


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path, "--api-token", TOKEN)
    yield running
    assert stop_server(running) == 0


def _export(server: Server, metadata: tuple[tuple[str, str], ...]) -> bytes:
    body = request("svc", [span(sid(1))]).SerializeToString()
    with grpc.insecure_channel(server.otlp_grpc) as channel:
        reply: bytes = channel.unary_unary(METHOD)(body, timeout=20, metadata=metadata)
        return reply


def test_serve_with_a_token_guards_api_and_both_otlp_receivers(secured: Server) -> None:
    api = secured.api
    assert httpx.get(f"{api}/incidents", timeout=10).status_code == 401
    assert httpx.get(f"{api}/incidents", headers={"authorization": "Bearer nope"}, timeout=10).status_code == 401
    assert httpx.get(f"{api}/incidents", headers={"authorization": f"Bearer {TOKEN}"}, timeout=10).status_code == 200
    assert httpx.get(f"{api}/healthz", timeout=10).status_code == 200

    for metadata in ((), (("authorization", "Bearer nope"),)):
        with pytest.raises(grpc.RpcError) as failure:
            _export(secured, metadata)
        assert failure.value.code() == grpc.StatusCode.UNAUTHENTICATED
    reply = ExportTraceServiceResponse.FromString(_export(secured, (("authorization", f"Bearer {TOKEN}"),)))
    assert reply.partial_success.rejected_spans == 0

    url = f"http://{secured.otlp_http}/v1/traces"
    body = request("svc", [span(sid(2))]).SerializeToString()
    protobuf = {"content-type": "application/x-protobuf"}
    assert httpx.post(url, content=body, headers=protobuf, timeout=10).status_code == 401
    authorized = {**protobuf, "authorization": f"Bearer {TOKEN}"}
    assert httpx.post(url, content=body, headers=authorized, timeout=10).status_code == 200


def test_warns_loudly_when_listening_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    exposed = start_server(tmp_path, "--http", "0.0.0.0:0")
    assert stop_server(exposed) == 0
    assert exposed.process.stderr is not None
    assert "WARNING: listening beyond loopback without --api-token" in exposed.process.stderr.read()


@pytest.mark.parametrize(
    ("http", "token", "warned"),
    [("0.0.0.0:0", None, True), ("[::]:0", None, True), ("0.0.0.0:0", TOKEN, False), ("127.0.0.1:0", None, False)],
)
def test_the_warning_depends_on_the_address_and_the_token(
    http: str, token: str | None, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """In process: `serve` warns before anything starts (an unloadable --db then stops it)."""
    settings = Settings(http=HostPort.parse(http), api_token=token, db="unloadable://")
    with caplog.at_level(logging.WARNING, logger="rca"):
        assert serve(settings, out=io.StringIO()) == 2
    assert ("beyond loopback without --api-token" in caplog.text) is warned
