"""`rca bench ingest`: alternating rounds of the bare receivers and rca, their ratios."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.ingest import LOGS, Rates, _table, measure
from benchmarks.log_payload import RECORDS_PER_REQUEST, TEMPLATES, log_export_requests
from ingest.otlp_logs import decode_logs_protobuf
from rca.app.cli import main
from rca.graph.service_graph import ServiceGraph
from tests.spanfactory import T0


def test_rounds_alternate_and_give_one_ratio_each() -> None:
    rates = measure(0.5, rounds=2)
    assert len(rates.bare_receiver) == len(rates.decoding_receiver) == len(rates.rca_end_to_end) == 2
    assert all(rate > 0 for rate in (*rates.bare_receiver, *rates.decoding_receiver, *rates.rca_end_to_end))
    assert len(rates.ratios) == len(rates.decoding_ratios) == 2


def test_ratios_are_rca_over_each_receiver_round_by_round(capsys: pytest.CaptureFixture[str]) -> None:
    """Hand-made rates: the table reports the median of the rounds' ratios."""
    rates = Rates(
        parse=1e6,
        parse_extract=5e5,
        bare_receiver=(400.0, 100.0, 300.0),
        decoding_receiver=(200.0, 80.0, 150.0),
        rca_end_to_end=(100.0, 50.0, 150.0),
        peak_rss_mb=64.0,
    )
    assert rates.ratios == (0.25, 0.5, 0.5)
    assert rates.decoding_ratios == (0.5, 0.625, 1.0)
    _table(rates, "spans/s")
    table = capsys.readouterr().out
    assert "0.50   (median; rounds: 0.25, 0.50, 0.50)" in table  # the ratio of the medians is 0.33
    assert "0.62   (median; rounds: 0.50, 0.62, 1.00)" in table  # not 0.67


def test_log_records_are_measured_against_their_own_bare_receiver() -> None:
    rates = measure(0.5, rounds=1, load=LOGS)
    assert all(
        rate > 0 for rate in (rates.parse, *rates.bare_receiver, *rates.decoding_receiver, *rates.rca_end_to_end)
    )
    assert len(rates.ratios) == 1


def test_log_payload_is_application_lines_of_a_few_dozen_templates() -> None:
    batches = [decode_logs_protobuf(r).batch for r in log_export_requests(4, RECORDS_PER_REQUEST, T0)]
    assert [len(b) for b in batches] == [RECORDS_PER_REQUEST] * 4
    bodies = [text for b in batches for text in b.body]
    assert 80 <= np.mean([len(text) for text in bodies]) <= 120
    assert len(set(bodies)) > 0.99 * len(bodies)  # numbers and ids vary record to record
    joined = np.mean([float((b.span_id != 0).mean()) for b in batches])
    assert 0.3 < joined < 0.5
    assert {b.strings[i] for b in batches for i in np.unique(b.service).tolist()} >= {"svc-00", "svc-03"}
    graph = ServiceGraph()
    for b in batches:
        graph.add_logs(b)
    assert len(TEMPLATES) * 0.9 <= graph.counts().log_templates <= len(TEMPLATES) * 1.1


def test_zero_rounds_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "ingest", "--rounds", "0"])
    assert exit_info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err
