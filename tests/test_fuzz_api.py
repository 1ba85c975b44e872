"""Fuzzing the HTTP API: schemathesis against the app's own /openapi.json (in-process ASGI, with
`--api-token` on, so requests without it must get 401), and hypothesis over the webhook schema.
No input gets a 5xx, responses conform to the description, and stored state stays readable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from api.schemas import WebhookBody
from tests.apiapp import api_app
from tests.spanfactory import T0, batch

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FIRING = {
    "version": "4",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "HighLatency", "service": "frontend"},
            "startsAt": "2025-12-29T09:20:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "fingerprint": "aa01",
        }
    ],
}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    """The API over a graph with a few spans and a stored incident, so reads find something."""
    with api_app(tmp_path / "fuzz.db", api_token=TOKEN, clock=lambda: T0) as (application, writer):
        spans = batch(("frontend", "GET /", 1, 0, 0, 20), ("cart", "get", 2, 1, 2, 10), ("db", "q", 3, 2, 3, 5))
        writer.submit(spans)
        assert TestClient(application).post("/webhooks/alertmanager", json=FIRING, headers=AUTH).status_code == 200
        yield application


# The webhook's times are plain strings in the description (RFC3339 and Go's zero time are checked
# by validators), so a schema-valid `startsAt` of "©" is rightly refused with 422, not accepted.
UNDER_DESCRIBED = schemathesis.checks.positive_data_acceptance
STATUS_CODES = schemathesis.checks.status_code_conformance  # replaced by the check below, which allows 404


def _fuzz(operation: Any) -> None:
    allowed = {int(code) for code in operation.definition.raw["responses"]}
    if "{" in operation.path:
        allowed.add(404)  # "unknown incident": the routes do not document it (yet)

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=operation.as_strategy())
    def check(case: Any) -> None:
        response = case.call(headers=AUTH)
        case.validate_response(response, headers=AUTH, excluded_checks=[UNDER_DESCRIBED, STATUS_CODES])
        assert response.status_code in allowed, (case.method, case.formatted_path, response.status_code)

    check()


def test_api_conforms_to_its_openapi_description(app: FastAPI) -> None:
    """Every operation, with schemathesis' generated requests (valid and invalid) and its
    default checks: no 5xx, documented status codes, content types and response schemas, and
    401 for requests that leave the declared bearer auth out."""
    api_schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=AUTH)
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/webhooks/alertmanager", "/incidents", "/graph"}
    for operation in operations:
        _fuzz(operation)


# -- the webhook schema --------------------------------------------------------------------

TIMES = st.sampled_from(
    ["2026-01-05T02:00:00Z", "0001-01-01T00:00:00Z", "2026-01-05T02:00:00.123456789+05:30", "9999-12-31T23:59:59Z"]
) | st.text(max_size=30)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10) | TIMES
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner))
LABELS = st.dictionaries(
    st.sampled_from(["alertname", "service", "job", "pod", "k8s_pod_name", "app", "x"]) | st.text(max_size=8),
    st.text(max_size=20) | JSON,
    max_size=5,
)
ALERT = st.fixed_dictionaries(
    {},
    optional={
        "status": st.sampled_from(["firing", "resolved", "pending"]) | JSON,
        "labels": LABELS | JSON,
        "annotations": LABELS,
        "startsAt": TIMES | JSON,
        "endsAt": TIMES | st.none() | st.just(""),
        "generatorURL": st.text(max_size=20) | JSON,
        "fingerprint": st.text(max_size=140) | JSON,
    },
)
WEBHOOK = st.fixed_dictionaries(
    {},
    optional={
        "version": st.just("4") | JSON,
        "status": st.sampled_from(["firing", "resolved"]) | JSON,
        "truncatedAlerts": st.integers() | JSON,
        "groupLabels": LABELS | JSON,
        "commonLabels": LABELS,
        "alerts": st.lists(ALERT, max_size=4) | JSON,
    },
)
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(WEBHOOK | JSON)
def test_webhook_schema_validates_or_names_the_field(body: Any) -> None:
    try:
        parsed = WebhookBody.model_validate(body)
    except ValidationError as exc:
        assert exc.errors() and all(e["msg"] for e in exc.errors())
        return
    alerts = parsed.to_alerts()
    assert len(alerts) == len(parsed.alerts)
    assert all(a.fingerprint and a.starts_at_ns > 0 for a in alerts)


@FUZZ
@given(st.binary(max_size=300) | st.builds(lambda b: json.dumps(b).encode(), WEBHOOK))
def test_webhook_schema_on_raw_bytes(data: bytes) -> None:
    try:
        body = WebhookBody.model_validate_json(data)
    except ValidationError as exc:
        assert exc.errors()
        return
    assert len(body.to_alerts()) == len(body.alerts)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=WEBHOOK)
def test_random_webhooks_get_200_or_422_and_leave_the_store_readable(app: FastAPI, body: Any) -> None:
    client = TestClient(app, headers=AUTH)
    content = json.dumps(body).encode()  # NaN and Infinity too, which Python's parser reads back
    response = client.post("/webhooks/alertmanager", content=content, headers={"content-type": "application/json"})
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        assert response.json()["detail"][0]["loc"]
    listed = client.get("/incidents", params={"limit": 1000})
    assert listed.status_code == 200
    for incident in listed.json()["incidents"][:3]:
        assert client.get(f"/incidents/{incident['id']}/causes").status_code == 200


def test_a_time_past_what_nanoseconds_hold_is_a_422_not_a_500(app: FastAPI) -> None:
    """Found by the fuzzer: an `endsAt` in year 9999 parsed, then overflowed SQLite's INTEGER."""
    alert = {**FIRING["alerts"][0], "endsAt": "9999-12-31T23:59:59Z"}  # type: ignore[index]
    client = TestClient(app, headers=AUTH)
    response = client.post("/webhooks/alertmanager", json={**FIRING, "alerts": [alert]})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "alerts", 0, "endsAt"]
    assert "1678-2262" in response.json()["detail"][0]["msg"]
    assert client.post("/webhooks/alertmanager", json=FIRING).status_code == 200  # the store took no harm


def test_non_finite_numbers_in_a_body_are_a_422_not_a_500(app: FastAPI) -> None:
    """Found by the fuzzer: Python's parser reads `Infinity`, and echoing it in the 422 failed."""
    body = b'{"version": Infinity, "truncatedAlerts": NaN, "alerts": [{"status": -Infinity}]}'
    client = TestClient(app, headers={**AUTH, "content-type": "application/json"})
    response = client.post("/webhooks/alertmanager", content=body)
    assert response.status_code == 422
    inputs = {tuple(e["loc"]): e["input"] for e in response.json()["detail"]}
    assert inputs[("body", "version")] == "inf"
    assert inputs[("body", "alerts", 0, "status")] == "-inf"
