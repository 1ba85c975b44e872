"""The soak test's short version: spans and log records at a steady rate over gRPC with webhooks
arriving, against a real `rca serve`. No acknowledged span or record is lost and the server's RSS
does not keep growing."""

from __future__ import annotations

from pathlib import Path

from benchmarks.soak import EndlessTraffic, LogTraffic, run


def test_short_soak_loses_nothing_and_memory_levels_off(tmp_path: Path) -> None:
    report = run(24, 3000, webhook_every_s=1.5, log_rate=2000, db_dir=tmp_path)
    assert report.failures == []
    assert report.acked_spans > 10_000
    assert report.lost_spans == 0
    assert report.received_spans == report.graph_spans == report.acked_spans
    assert report.acked_log_records > 10_000
    assert report.received_log_records == report.graph_log_records == report.acked_log_records
    assert report.webhooks >= 5 and report.webhook_errors == 0
    assert report.server_exit == 0
    # generous: the last third's mean RSS within 1.5x of the middle third's (retention evicts)
    assert report.rss_last_third_mb <= 1.5 * report.rss_middle_third_mb, report.rss_mb


def test_traffic_patches_times_and_ids_of_every_span() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    traffic = EndlessTraffic(3000)
    template = traffic.templates[3]
    prefix = (77).to_bytes(4, "big")
    before = ExportTraceServiceRequest.FromString(template.body.tobytes())
    after = ExportTraceServiceRequest.FromString(template.shifted(10**12, prefix))
    old = [s for rs in before.resource_spans for ss in rs.scope_spans for s in ss.spans]
    new = [s for rs in after.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(new) == template.records > 0
    for a, b in zip(old, new, strict=True):
        assert (b.start_time_unix_nano, b.end_time_unix_nano) == (
            a.start_time_unix_nano + 10**12,
            a.end_time_unix_nano + 10**12,
        )
        assert b.trace_id == prefix + a.trace_id[4:] and b.span_id == prefix + a.span_id[4:]
        assert b.parent_span_id == (prefix + a.parent_span_id[4:] if a.parent_span_id else b"")
        assert (b.name, b.kind, b.attributes) == (a.name, a.kind, a.attributes)
    assert template.newest_ns == max(s.start_time_unix_nano for s in old)
    # at 3,000 spans/s each request goes out in copies so event time keeps pace with the clock
    assert traffic.copies > 1


def test_log_traffic_patches_times_and_ids_of_every_record() -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    traffic = LogTraffic(2000, 10**18, 60 * 10**9, requests=2)
    template = traffic.templates[1]
    prefix = (5).to_bytes(4, "big")
    before = ExportLogsServiceRequest.FromString(template.body.tobytes())
    after = ExportLogsServiceRequest.FromString(template.shifted(10**12, prefix))
    old = [r for rl in before.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    new = [r for rl in after.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert len(new) == template.records == 1000
    for a, b in zip(old, new, strict=True):
        assert (b.time_unix_nano, b.observed_time_unix_nano) == (
            a.time_unix_nano + 10**12,
            a.observed_time_unix_nano + 10**12,
        )
        assert b.trace_id == (prefix + a.trace_id[4:] if a.trace_id else b"")
        assert b.span_id == (prefix + a.span_id[4:] if a.span_id else b"")
        assert (b.body, b.severity_number, b.attributes) == (a.body, a.severity_number, a.attributes)
    assert template.newest_ns == max(r.time_unix_nano for r in old)
    assert sum(bool(r.span_id) for r in old) > 0
    assert traffic.copies == 60  # 2,000 records/s for a minute a round of 2,000 records: each request 60 times
