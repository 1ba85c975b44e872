"""The soak test's short version: spans at a steady rate over gRPC with webhooks arriving, against
a real `rca serve`. No acknowledged span is lost and the server's RSS does not keep growing."""

from __future__ import annotations

from pathlib import Path

from benchmarks.soak import run


def test_short_soak_loses_nothing_and_memory_levels_off(tmp_path: Path) -> None:
    report = run(24, 3000, webhook_every_s=1.5, db_dir=tmp_path)
    assert report.failures == []
    assert report.acked_spans > 10_000
    assert report.lost_spans == 0
    assert report.received_spans == report.graph_spans == report.acked_spans
    assert report.webhooks >= 5 and report.webhook_errors == 0
    assert report.server_exit == 0
    # generous: the last third's mean RSS within 1.5x of the middle third's (retention evicts)
    assert report.rss_last_third_mb <= 1.5 * report.rss_middle_third_mb, report.rss_mb
