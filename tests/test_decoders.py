"""OTLP/JSON, Jaeger JSON and file detection against the spec examples and hand-made edge cases."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.nezha import read_trace_csv
from ingest.files import decode_bytes, decode_file, gunzip_bounded
from ingest.jaeger_json import decode_jaeger_json
from ingest.otlp_encode import encode_batch
from ingest.otlp_json import decode_otlp_json
from rca.telemetry.spans import DecodeError, TooLarge
from tests.spanfactory import json_span, otlp_json

TRACE_ID = "5b8efff798038103d269b633813fc60c"


def test_otlp_json_spec_example(datasets: Path) -> None:
    result = decode_file(datasets / "spec-examples/opentelemetry-proto/trace.json")
    batch = result.batch
    assert len(batch) == 1 and result.rejected == 0
    assert batch.strings[batch.service[0]] == "my.service"
    assert batch.trace_id[0, 0] == 0x5B8EFFF798038103  # read as hex, not base64
    assert batch.duration_ns[0] == 1_000_000_000


def test_jaeger_fixtures_decode_with_parents_and_microseconds(datasets: Path) -> None:
    ui = decode_file(datasets / "spec-examples/jaeger/uimodel_converter_v1_json_fixtures_ui_01.json").batch
    assert len(ui) == 5
    assert {ui.strings[s] for s in ui.service} == {"service-x", "service-y"}
    assert sorted(ui.duration_ns.tolist()) == [4000, 5000, 5000, 5000, 5000]  # µs in the file
    ids = set(ui.span_id.tolist())
    assert any(p in ids for p in ui.parent_id.tolist() if p)  # references became parent links
    bare = decode_file(datasets / "spec-examples/jaeger/anonymizer_app_uiconv_fixtures_trace_success.json").batch
    assert len(bare) == 2 and bare.duration_ns[0] == 267_037_000


def test_every_trace_example_decodes_and_other_signals_are_refused(datasets: Path) -> None:
    decoded = 0
    for path in sorted((datasets / "spec-examples").rglob("*.json")):
        if path.stem in ("logs", "metrics", "events"):
            with pytest.raises(DecodeError, match="not traces"):
                decode_file(path)
        else:
            assert len(decode_file(path).batch) > 0, path
            decoded += 1
    assert decoded == 5


def test_bad_ids_and_times_are_rejected_with_reasons_others_kept() -> None:
    body = otlp_json(
        [
            json_span("eee19b7ec3c1b174"),
            json_span("eee19b7e"),
            json_span("zz"),
            json_span("aaa19b7ec3c1b174", endTimeUnixNano="1"),
        ]
    )
    result = decode_otlp_json(body)
    assert len(result.batch) == 1
    assert result.rejected == 3
    assert "span_id" in result.message and "before" in result.message


def test_otlp_json_enum_names_and_errors() -> None:
    result = decode_otlp_json(
        otlp_json([json_span("eee19b7ec3c1b174", kind="SPAN_KIND_CLIENT", status={"code": "STATUS_CODE_ERROR"})])
    )
    assert result.batch.kind[0] == 3 and bool(result.batch.error[0])


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"resourceSpans": 3}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "x"}]}]}]}',
    ],
)
def test_malformed_otlp_json_raises_with_the_place(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_otlp_json(body)


def test_jaeger_malformed_structure_names_the_field() -> None:
    with pytest.raises(DecodeError, match="spans"):
        decode_jaeger_json(b'{"data": [{"traceID": "1"}]}')


def test_gzip_bound_refuses_bombs_and_corruption() -> None:
    assert gunzip_bounded(gzip.compress(b"abc"), 10) == b"abc"
    with pytest.raises(TooLarge):
        gunzip_bounded(gzip.compress(b"\0" * (10 << 20)), 1 << 20)
    with pytest.raises(DecodeError):
        gunzip_bounded(b"\x1f\x8b\x08garbage", 1 << 20)


def test_files_detect_gzip_protobuf_from_nezha(datasets: Path, tmp_path: Path) -> None:
    minute = read_trace_csv(datasets / "nezha-dev/2023-01-29/trace/08_43_trace.csv.gz")
    messages = encode_batch(minute, max_spans=len(minute))
    path = tmp_path / "minute.pb.gz"
    path.write_bytes(gzip.compress(messages[0]))
    again = decode_file(path).batch
    assert len(again) == len(minute)
    assert np.array_equal(np.sort(again.span_id), np.sort(minute.span_id))
    assert len(decode_bytes(messages[0]).batch) == len(minute)


def test_rca_analyze_prints_the_graph_of_a_nezha_minute(datasets: Path, tmp_path: Path) -> None:
    minute = read_trace_csv(datasets / "nezha-dev/2023-01-29/trace/08_43_trace.csv.gz")
    path = tmp_path / "minute.pb"
    path.write_bytes(encode_batch(minute, max_spans=len(minute))[0])
    done = subprocess.run(
        [sys.executable, "-m", "rca.app.cli", "analyze", "--traces", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["spans"] == len(minute)
    edges = {(e["source"], e["target"]) for e in report["edges"]}
    assert ("ts-gateway-service", "ts-auth-service") in edges
    assert len(report["nodes"]) >= 20
