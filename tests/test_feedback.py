"""`POST /incidents/{id}/feedback` through the whole service (`Service` from `Settings`, real
SQLite file, real ranker): the label and its evidence snapshot stored, replaced, read back after
a restart; 404, 422 naming the field, auth; the ranking left as it was; older databases."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect

from benchmarks.cases import nezha_webhook
from rca.app.compose import Service
from rca.app.config import Settings
from rca.evidence.nodes import NodeEvidence, extract_evidence
from rca.graph.service_graph import ServiceGraph
from rca.incidents.labels import Label, LabelledIncident, Snapshot
from rca.incidents.model import AlertPlacement, IncidentStatus
from rca.telemetry.faults import Fault
from rca.telemetry.spans import SpanBatch
from storage.schema import alerts, incidents, metadata, rankings
from storage.sql import SqlIncidentStore
from tests.spanfactory import T0, batch
from tests.test_incidents_service import alert
from tests.test_store import postgres, url  # noqa: F401  (fixtures: the label store on PostgreSQL too)

S = 1_000_000_000
ALERT_NS = T0 + 450 * S
TOKEN = "feedback-token"
LABEL = {"node": "payment", "fault": "latency", "note": "GC pauses after the deploy"}


def _traffic() -> SpanBatch:
    """gateway → checkout → payment every 2 s for 10 minutes; payment slows from 7 minutes on."""
    spans = []
    for i in range(300):
        start, slow = 2000 * i, 2000 * i >= 420_000
        payment = 60 if slow else 10
        spans += [
            ("gateway", "GET /", 3 * i + 1, 0, start, payment + 60),
            ("checkout", "Place", 3 * i + 2, 3 * i + 1, start + 5, payment + 40),
            ("payment", "Charge", 3 * i + 3, 3 * i + 2, start + 10, payment),
        ]
    return batch(*spans)


@contextmanager
def served(
    db: Path, token: str | None = None, spans: bool = True, params: Path | None = None
) -> Iterator[tuple[Service, TestClient]]:
    """`rca serve`'s parts on `db` (the spans of `_traffic` in its graph), and a client of its API."""
    service = Service(Settings(db=f"sqlite:///{db}", api_token=token, params=params))
    try:
        if spans:
            service.writer.submit(_traffic())
        with TestClient(service.api) as client:
            yield service, client
    finally:
        service.writer.close()
        service.store.close()


def open_incident(client: TestClient, headers: dict[str, str] | None = None) -> str:
    answer = client.post("/webhooks/alertmanager", json=nezha_webhook("fb", "gateway", ALERT_NS), headers=headers)
    assert answer.status_code == 200, answer.text
    incident_id: str = answer.json()["incidents"][0]["id"]
    return incident_id


def _assert_same_evidence(a: NodeEvidence, b: NodeEvidence) -> None:
    for field in dataclasses.fields(NodeEvidence):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), field.name
        else:
            assert x == y, field.name


def test_feedback_is_stored_with_what_the_model_saw_and_leaves_the_ranking(tmp_path: Path) -> None:
    with served(tmp_path / "rca.db") as (service, client):
        incident = open_incident(client)
        before = client.get(f"/incidents/{incident}/causes").json()
        answer = client.post(f"/incidents/{incident}/feedback", json=LABEL)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body.pop("created_at").endswith("Z")
        assert body == {**LABEL, "incident_id": incident, "window": before["window"], "in_evidence": True}
        assert client.get(f"/incidents/{incident}/feedback").json() == answer.json()
        assert client.get(f"/incidents/{incident}/causes").json() == before  # unchanged, not re-ranked

        stored = service.store.label(incident)
        assert stored is not None and stored.label.fault is Fault.LATENCY
        assert stored.snapshot.alert_nodes == ("gateway",)
        start, end = stored.snapshot.start_ns, stored.snapshot.end_ns
        seen = service.writer.read(lambda g: service.feedback.model.evidence(g, start_ns=start, end_ns=end))
        _assert_same_evidence(stored.snapshot.evidence, seen)
        payment = seen.index("payment")
        assert seen.score[payment, 0] > 3  # the snapshot holds the shift the ranking saw


def test_a_later_label_replaces_the_earlier_and_a_null_fault_is_kept(tmp_path: Path) -> None:
    with served(tmp_path / "rca.db") as (service, client):
        incident = open_incident(client)
        assert client.post(f"/incidents/{incident}/feedback", json=LABEL).status_code == 200
        answer = client.post(f"/incidents/{incident}/feedback", json={"node": "checkout", "fault": None})
        assert answer.status_code == 200
        assert (answer.json()["node"], answer.json()["fault"], answer.json()["note"]) == ("checkout", None, "")
        labelled, unreadable = service.store.labelled()
        assert [(x.label.node, x.label.fault) for x in labelled] == [("checkout", None)] and unreadable == {}
        named_elsewhere = client.post(f"/incidents/{incident}/feedback", json={"node": "dns", "fault": None})
        assert named_elsewhere.json()["in_evidence"] is False  # stored all the same; rca fit can't use it


def test_unknown_incident_is_404(tmp_path: Path) -> None:
    with served(tmp_path / "rca.db") as (_, client):
        for answer in (
            client.post("/incidents/inc-nope/feedback", json=LABEL),
            client.get("/incidents/inc-nope/feedback"),
        ):
            assert answer.status_code == 404
            assert "inc-nope" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"node": "payment", "fault": "disk"}, "fault"),
        ({"fault": "latency"}, "node"),
        ({"node": "", "fault": None}, "node"),
        ({"node": "payment"}, "fault"),
        ({"node": "payment", "fault": None, "note": 5}, "note"),
        ({"node": "payment", "fault": None, "colour": "red"}, "colour"),
        ([LABEL], "body"),
    ],
)
def test_malformed_bodies_are_422_naming_the_field(tmp_path: Path, body: Any, field: str) -> None:
    with served(tmp_path / "rca.db") as (service, client):
        incident = open_incident(client)
        answer = client.post(f"/incidents/{incident}/feedback", json=body)
        assert answer.status_code == 422
        assert any(error["loc"][-1] == field or error["loc"] == ["body"] for error in answer.json()["detail"])
        assert field in str(answer.json()["detail"])
        assert service.store.label(incident) is None


def test_feedback_needs_the_token(tmp_path: Path) -> None:
    with served(tmp_path / "rca.db", token=TOKEN) as (_, client):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        incident = open_incident(client, auth)
        assert client.post(f"/incidents/{incident}/feedback", json=LABEL).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert client.post(f"/incidents/{incident}/feedback", json=LABEL, headers=wrong).status_code == 401
        assert client.get(f"/incidents/{incident}/feedback", headers=auth).status_code == 404  # nothing stored
        assert client.post(f"/incidents/{incident}/feedback", json=LABEL, headers=auth).status_code == 200


def test_the_label_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "rca.db"
    with served(db) as (service, client):
        incident = open_incident(client)
        posted = client.post(f"/incidents/{incident}/feedback", json=LABEL).json()
        stored = service.store.label(incident)
    with served(db, spans=False) as (service, client):  # a fresh graph: the spans are gone
        assert client.get(f"/incidents/{incident}/feedback").json() == posted
        (again,), _ = service.store.labelled()
    assert stored is not None and again.label == stored.label
    assert (again.snapshot.start_ns, again.snapshot.end_ns) == (stored.snapshot.start_ns, stored.snapshot.end_ns)
    _assert_same_evidence(again.snapshot.evidence, stored.snapshot.evidence)


def test_an_older_database_opens_and_takes_labels(tmp_path: Path) -> None:
    """A database made before labels existed: its rows stay, the labels table is added."""
    db = tmp_path / "old.db"
    engine = create_engine(f"sqlite:///{db}")
    metadata.create_all(engine, tables=[incidents, alerts, rankings])
    engine.dispose()
    old = SqlIncidentStore.open(f"sqlite:///{db}")
    old.record([AlertPlacement(alert("gateway", 0), "inc-old")], [], T0)
    old.close()
    with served(db) as (service, client):
        assert "labels" in inspect(service.store.engine).get_table_names()
        assert [i.id for i in service.store.incidents(IncidentStatus.OPEN)] == ["inc-old"]
        answer = client.post("/incidents/inc-old/feedback", json=LABEL)
        assert answer.status_code == 200 and answer.json()["in_evidence"] is True


def test_labels_round_trip_in_the_store(url: str) -> None:  # noqa: F811
    """SQLite and PostgreSQL alike: a label, its replacement, its snapshot exactly."""
    graph = ServiceGraph(retention_seconds=3600)
    graph.add(_traffic())
    evidence = extract_evidence(graph, start_ns=ALERT_NS - 300 * S, end_ns=graph.newest_ns + 1)
    snapshot = Snapshot(evidence, ("gateway",), ALERT_NS - 300 * S, graph.newest_ns + 1)
    store = SqlIncidentStore.open(url)
    try:
        placed = [AlertPlacement(alert("gateway", 0), "inc-1"), AlertPlacement(alert("search", 0), "inc-2")]
        store.record(placed, [], T0)
        first = LabelledIncident(Label("inc-1", "payment", Fault.LATENCY, "x", T0 + 2), snapshot)
        store.save_label(first)
        store.save_label(LabelledIncident(Label("inc-2", "index", None, "", T0 + 1), snapshot))
        replaced = LabelledIncident(Label("inc-1", "checkout", None, "\N{SNOWMAN}", T0 + 3), snapshot)
        store.save_label(replaced)
        read = store.label("inc-1")
        assert read is not None and read.label == replaced.label and store.label("inc-3") is None
        labelled, unreadable = store.labelled()
        assert [x.label.incident_id for x in labelled] == ["inc-2", "inc-1"] and unreadable == {}  # oldest first
        for x in labelled:
            assert (x.snapshot.alert_nodes, x.snapshot.start_ns, x.snapshot.end_ns) == (
                snapshot.alert_nodes,
                snapshot.start_ns,
                snapshot.end_ns,
            )
            _assert_same_evidence(x.snapshot.evidence, evidence)
    finally:
        store.close()
