"""`rca simulate`: the files it writes read back through `rca analyze`'s decoders unchanged, and
the webhooks have Alertmanager's v4 shape (contract sections 1 and 5)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from ingest.files import decode_file
from rca.app.cli import main
from rca.telemetry.alerts import parse_rfc3339_ns
from rca.telemetry.spans import SpanBatch
from simulation import simulate
from tests.conftest import DATASETS

SCENARIO, SEED, RATE = "llm-kv_cache_fragmentation", 3, 0.4
SAMPLE = {
    "receiver": "rca-webhook",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "HighErrorRate", "service": "checkout", "severity": "critical"},
            "annotations": {"description": "error ratio 0.12 over 5m", "summary": "checkout 5xx > 5%"},
            "startsAt": "2026-12-02T07:45:04Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.local/graph?g0.expr=rate",
            "fingerprint": "7d2d332feada5c59",
        }
    ],
    "groupLabels": {"alertname": "HighErrorRate", "service": "checkout"},
    "commonLabels": {"alertname": "HighErrorRate", "service": "checkout", "severity": "critical"},
    "commonAnnotations": {"description": "error ratio 0.12 over 5m", "summary": "checkout 5xx > 5%"},
    "externalURL": "http://vm:19093",
    "version": "4",
    "groupKey": '{}:{alertname="HighErrorRate", service="checkout"}',
    "truncatedAlerts": 0,
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("case")
    assert main(["simulate", SCENARIO, "--out", str(out), "--seed", str(SEED), "--rate", str(RATE)]) == 0
    return out


COLUMNS = [k for k in SpanBatch.__dataclass_fields__ if k != "strings"]


def _sorted(batches: list[SpanBatch]) -> SpanBatch:
    """The batches as one, rows by span id."""
    joined = {k: np.concatenate([getattr(b, k) for b in batches]) for k in COLUMNS}
    order = np.argsort(joined["span_id"])
    return SpanBatch(**{k: v[order] for k, v in joined.items()}, strings=batches[0].strings)


@pytest.mark.parametrize("name", ["traces.pb", "traces.json"])
def test_trace_files_read_back_to_the_same_spans(written: Path, name: str) -> None:
    case = simulate(SCENARIO, seed=SEED, rate=RATE)
    result = decode_file(written / name)
    assert result.rejected == 0 and len(result.batch) == case.spans
    a, b = _sorted(list(case.batches)), _sorted([result.batch])
    for column in ("span_id", "parent_id", "start_ns", "end_ns", "error", "kind"):
        assert np.array_equal(getattr(a, column), getattr(b, column)), column
    assert np.array_equal(a.trace_id, b.trace_id)
    assert np.allclose(a.signals, b.signals, equal_nan=True, rtol=1e-12)
    for column in ("service", "operation", "peer", "resource"):
        left = [a.strings[i] if i >= 0 else None for i in getattr(a, column)]
        right = [b.strings[i] if i >= 0 else None for i in getattr(b, column)]
        assert left == right, column


def test_json_traces_are_otlp_json_with_hex_ids(written: Path) -> None:
    document = json.loads((written / "traces.json").read_text())
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert re.fullmatch("[0-9a-f]{32}", span["traceId"]) and re.fullmatch("[0-9a-f]{16}", span["spanId"])
    assert isinstance(span["kind"], int) and isinstance(span["startTimeUnixNano"], str)


def test_log_files_hold_every_record_of_the_case(written: Path) -> None:
    case = simulate(SCENARIO, seed=SEED, rate=RATE)
    request = ExportLogsServiceRequest.FromString((written / "logs.pb").read_bytes())
    wire = [(r.resource.attributes[0].value.string_value, x) for r in request.resource_logs for x in r.scope_logs]
    records = [(service, record) for service, scope in wire for record in scope.log_records]
    expected = sorted(
        (b.strings[s], int(t), body, int(v))
        for b in case.logs
        for s, t, body, v in zip(b.service, b.time_ns, b.body, b.severity, strict=True)
    )
    got = sorted((s, r.time_unix_nano, r.body.string_value, r.severity_number) for s, r in records)
    assert len(got) == case.log_records > 0 and got == expected
    spans = {int(i) for b in case.batches for i in b.span_id}
    assert all(int.from_bytes(r.span_id, "big") in spans for _, r in records if r.span_id)
    document = json.loads((written / "logs.json").read_text())
    in_json = [x for r in document["resourceLogs"] for s in r["scopeLogs"] for x in s["logRecords"]]
    assert len(in_json) == case.log_records
    spanned = next(x for x in in_json if "spanId" in x)
    assert re.fullmatch("[0-9a-f]{32}", spanned["traceId"]) and re.fullmatch("[0-9a-f]{16}", spanned["spanId"])
    assert isinstance(spanned["severityNumber"], int) and isinstance(spanned["timeUnixNano"], str)


def test_truth_json_names_the_fault(written: Path) -> None:
    truth = json.loads((written / "truth.json").read_text())
    case = simulate(SCENARIO, seed=SEED, rate=RATE)
    assert truth["scenario"] == SCENARIO and truth["seed"] == SEED and truth["fault"] == "kv_cache_fragmentation"
    assert truth["node"] == case.truth.node and re.fullmatch(r"gpu:gpu-node-\d+/\d+", truth["node"])
    assert truth["service"].startswith("vllm-worker-") and truth["alert_services"]
    assert truth["roots"] == [
        {
            "node": truth["node"],
            "fault": truth["fault"],
            "service": truth["service"],
            "magnitude": case.truth.roots[0].magnitude,
            "inject_ns": truth["inject_ns"],
            "end_ns": truth["end_ns"],
            "mode": "",
        }
    ]
    assert truth["profile"] == "default" and re.fullmatch(r"tp[248]x[12]", truth["layout"])
    assert truth["drifting"] == list(case.truth.drifting) and truth["service"] not in truth["drifting"]
    assert parse_rfc3339_ns(truth["inject"]) == truth["inject_ns"] == case.truth.inject_ns
    assert parse_rfc3339_ns(truth["end"]) == truth["end_ns"] > truth["inject_ns"]


def test_webhooks_have_the_v4_shape_and_fire_after_a_realistic_delay(written: Path) -> None:
    truth = json.loads((written / "truth.json").read_text())
    schedule = json.loads((written / "schedule.json").read_text())["webhooks"]
    files = sorted((written / "webhooks").glob("*.json"))
    assert [f"webhooks/{f.name}" for f in files] == [s["file"] for s in schedule] and len(files) >= 2
    sent = [parse_rfc3339_ns(s["sent_at"]) or 0 for s in schedule]
    assert sent == sorted(sent)
    statuses = []
    for path, sent_ns in zip(files, sent, strict=True):
        body = json.loads(path.read_text())
        assert list(body) == list(SAMPLE) and body["version"] == "4"
        alert = body["alerts"][0]
        assert list(alert) == list(SAMPLE["alerts"][0])  # type: ignore[index]
        assert set(alert["labels"]) == {"alertname", "service", "severity"}
        assert alert["labels"]["service"] in truth["alert_services"]
        assert re.fullmatch("[0-9a-f]{16}", alert["fingerprint"])
        starts = parse_rfc3339_ns(alert["startsAt"])
        assert starts is not None and 60e9 <= starts - truth["inject_ns"] <= 120e9 and sent_ns >= starts
        if body["status"] == "firing":
            assert alert["endsAt"] == "0001-01-01T00:00:00Z"
        else:
            ends = parse_rfc3339_ns(alert["endsAt"])
            assert ends is not None and ends > truth["end_ns"] and sent_ns >= ends
        statuses.append((alert["fingerprint"], body["status"]))
    assert all((f, "resolved") in statuses for f, _ in statuses)


def test_sample_matches_the_captured_alertmanager_payload() -> None:
    path = DATASETS / "alertmanager" / "firing-0.25.0.json"
    if not path.exists():
        pytest.skip(f"shared datasets not found at {DATASETS}")
    assert json.loads(path.read_text()) == SAMPLE


def test_shifted_profile_and_two_roots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "llm-numa_mismatch-double", "--out", str(tmp_path), "--seed", "4", "--rate", "0.2"]
    assert main([*args, "--profile", "shifted"]) == 0
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["profile"] == "shifted" and truth["roots"][0]["node"] == truth["node"]
    assert truth["roots"][0]["fault"] == truth["fault"] == "numa_mismatch" and len(truth["roots"]) == 2
    assert truth["roots"][1]["node"] != truth["node"] and truth["roots"][1]["fault"] in ("latency", "errors")
    assert main([*args, "--profile", "nope"]) == 2
    assert "unknown profile" in capsys.readouterr().err


def _span_attributes(path: Path) -> list[tuple[str, str, dict[str, object]]]:
    """(service, span name, attributes) of every span in an OTLP/JSON traces file."""
    document = json.loads(path.read_text())
    out = []
    for resource in document["resourceSpans"]:
        names = (a["value"]["stringValue"] for a in resource["resource"]["attributes"] if a["key"] == "service.name")
        service = next(names)
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                attributes = {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}
                out.append((service, span["name"], attributes))
    return out


def test_nccl_spans_name_their_communicator_and_rank(written: Path) -> None:
    spans = _span_attributes(written / "traces.json")
    nccl = [(service, name, a) for service, name, a in spans if name.startswith("nccl:")]
    assert nccl and all({"nccl.comm_id", "nccl.rank", "nccl.op", "nccl.bytes"} <= set(a) for _, _, a in nccl)
    for service, name, a in nccl:
        assert service.endswith(f"-{a['nccl.rank']}") and name == f"nccl:{a['nccl.op']}"
        assert ("nccl.peer_rank" in a) == (name == "nccl:Send")
    replicas = {service.rsplit("-", 1)[0] for service, _, _ in nccl}
    comms = {a["nccl.comm_id"] for _, _, a in nccl}
    assert len(comms) == len(replicas)  # one communicator per engine replica
    assert {"gen_ai.usage.input_tokens", "gen_ai.request.priority"} <= {k for _, _, a in spans for k in a}


def test_the_shifted_profile_spells_tokens_and_urgency_the_other_way(tmp_path: Path) -> None:
    args = ["simulate", "llm-scheduler_priority_inversion", "--out", str(tmp_path), "--seed", "2", "--rate", "0.2"]
    assert main([*args, "--profile", "shifted"]) == 0
    keys = {k for _, _, a in _span_attributes(tmp_path / "traces.json") for k in a}
    assert {"gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens", "http.request.header.x-priority"} <= keys
    assert not keys & {"gen_ai.usage.input_tokens", "gen_ai.request.priority"}
    case = simulate("llm-scheduler_priority_inversion", seed=2, rate=0.2, profile="shifted")
    decoded = _sorted([decode_file(tmp_path / "traces.pb").batch])
    assert np.allclose(_sorted(list(case.batches)).signals, decoded.signals, equal_nan=True, rtol=1e-12)


def test_list_and_bad_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["simulate", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "llm-gpu_memory_bandwidth" in listed and "mesh1000-latency" in listed
    assert main(["simulate", "no-such-scenario", "--out", str(tmp_path)]) == 2
    assert "unknown scenario" in capsys.readouterr().err
    assert main(["simulate", "llm-latency"]) == 2
