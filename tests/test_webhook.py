"""The webhook and incident endpoints through FastAPI: contract shapes, 422s, 404s, no 5xx."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from rca.graph.writer import GraphWriter
from rca.incidents.service import IncidentService
from rca.ranking.causes import Ranker
from storage.sql import SqlIncidentStore
from tests.spanfactory import T0
from tests.test_incidents_service import FailingRanker, FixedRanker, shop_graph

CAPTURE_STARTS_NS = 1_796_197_504_000_000_000  # the captures' startsAt; the graph's spans are a minute before


def client_for(tmp_path: Path, ranker: Ranker) -> Iterator[TestClient]:
    writer = GraphWriter(shop_graph(offset_ms=(CAPTURE_STARTS_NS - T0) // 1_000_000 - 60_000))
    store = SqlIncidentStore.open(f"sqlite:///{tmp_path}/rca.db")
    service = IncidentService(store=store, ranker=ranker, graphs=writer)
    with TestClient(create_app(writer, service)) as client:
        yield client
    store.close()
    writer.close()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    yield from client_for(tmp_path, FixedRanker())


@pytest.fixture
def firing(datasets: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((datasets / "alertmanager" / "firing-0.25.0.json").read_text())
    return body


@pytest.fixture
def resolved(datasets: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((datasets / "alertmanager" / "resolved-0.25.0.json").read_text())
    return body


def test_firing_capture_opens_an_incident_with_causes(client: TestClient, firing: dict[str, Any]) -> None:
    response = client.post("/webhooks/alertmanager", json=firing)
    assert response.status_code == 200
    (summary,) = response.json()["incidents"]
    assert set(summary) == {"id", "status", "started_at", "alerts", "services", "causes"}
    assert (summary["status"], summary["started_at"], summary["alerts"]) == ("open", "2026-12-02T07:45:04Z", 1)
    assert summary["services"] == ["checkout"]
    assert 1 <= len(summary["causes"]) <= 5
    cause = summary["causes"][0]
    assert set(cause) == {"rank", "node", "service", "fault", "probability", "evidence", "path"}
    assert (cause["rank"], cause["node"], cause["fault"]) == (1, "checkout", "latency")


def test_resent_group_and_resolution(client: TestClient, firing: dict[str, Any], resolved: dict[str, Any]) -> None:
    first = client.post("/webhooks/alertmanager", json=firing).json()["incidents"][0]
    again = client.post("/webhooks/alertmanager", json=firing).json()["incidents"][0]
    assert again["id"] == first["id"] and again["alerts"] == 1
    done = client.post("/webhooks/alertmanager", json=resolved).json()["incidents"][0]
    assert (done["id"], done["status"], done["alerts"]) == (first["id"], "resolved", 1)
    assert client.get("/incidents", params={"status": "open"}).json() == {"incidents": []}
    listed = client.get("/incidents", params={"status": "resolved", "limit": 10}).json()["incidents"]
    assert [i["id"] for i in listed] == [first["id"]]
    detail = client.get(f"/incidents/{first['id']}").json()
    assert detail["status"] == "resolved" and detail["ended_at"] == "2026-12-02T07:45:11Z"
    assert [a["fingerprint"] for a in detail["alerts"]] == ["7d2d332feada5c59"]
    assert detail["alerts"][0]["endsAt"] == "2026-12-02T07:45:11Z"


def test_causes_follow_the_contract(client: TestClient, firing: dict[str, Any]) -> None:
    incident = client.post("/webhooks/alertmanager", json=firing).json()["incidents"][0]
    body = client.get(f"/incidents/{incident['id']}/causes").json()
    # `sources` (which telemetry sources answered) is beyond the contract's keys
    assert set(body) == {"incident_id", "status", "window", "model", "causes", "sources"}
    assert (body["incident_id"], body["status"]) == (incident["id"], "open")
    assert body["window"]["start"] == "2026-12-02T07:40:04Z"  # startsAt minus the 5 min look-back
    assert body["model"]["name"] == "fixed" and isinstance(body["model"]["inference_ms"], float)
    probabilities = [c["probability"] for c in body["causes"]]
    assert len(probabilities) == 5 and probabilities == sorted(probabilities, reverse=True)
    assert abs(sum(probabilities) - 1.0) < 1e-9
    assert [c["rank"] for c in body["causes"]] == [1, 2, 3, 4, 5]


def test_unknown_incidents_are_404(client: TestClient) -> None:
    for path in ("/incidents/inc-nope", "/incidents/inc-nope/causes"):
        response = client.get(path)
        assert response.status_code == 404
        assert "inc-nope" in response.json()["detail"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("alerts"), "alerts"),
        (lambda b: b["alerts"][0].pop("startsAt"), "startsAt"),
        (lambda b: b["alerts"][0].update(startsAt="last tuesday"), "startsAt"),
        (lambda b: b["alerts"][0].update(endsAt=17), "endsAt"),
        (lambda b: b["alerts"][0].update(status="pending"), "status"),
        (lambda b: b["alerts"][0].update(labels={"service": 3}), "labels"),
        (lambda b: b.update(truncatedAlerts="many"), "truncatedAlerts"),
    ],
)
def test_malformed_bodies_are_422_naming_the_field(
    client: TestClient, firing: dict[str, Any], mutate: Any, field: str
) -> None:
    body = copy.deepcopy(firing)
    mutate(body)
    response = client.post("/webhooks/alertmanager", json=body)
    assert response.status_code == 422
    assert any(field in error["loc"] for error in response.json()["detail"])


def test_invalid_json_and_bad_query_are_422(client: TestClient) -> None:
    response = client.post("/webhooks/alertmanager", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert client.get("/incidents", params={"status": "sleeping"}).status_code == 422
    assert client.get("/incidents", params={"limit": 0}).status_code == 422


def test_failing_ranker_still_answers_200(tmp_path: Path, firing: dict[str, Any]) -> None:
    for client in client_for(tmp_path, FailingRanker()):
        response = client.post("/webhooks/alertmanager", json=firing)
        assert response.status_code == 200
        (summary,) = response.json()["incidents"]
        assert summary["causes"] == []
        causes = client.get(f"/incidents/{summary['id']}/causes").json()
        assert causes["causes"] == [] and causes["model"]["name"] == "none"
        assert client.get("/incidents").json()["incidents"][0]["id"] == summary["id"]
