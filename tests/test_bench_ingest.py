"""`rca bench ingest`: alternating rounds of the bare receivers and rca, their ratios."""

from __future__ import annotations

import pytest

from benchmarks.ingest import measure
from rca.cli import main


def test_rounds_alternate_and_give_one_ratio_each() -> None:
    rates = measure(0.5, rounds=2)
    assert len(rates.bare_receiver) == len(rates.decoding_receiver) == len(rates.rca_end_to_end) == 2
    assert all(rate > 0 for rate in (*rates.bare_receiver, *rates.decoding_receiver, *rates.rca_end_to_end))
    assert rates.ratios == tuple(r / b for r, b in zip(rates.rca_end_to_end, rates.bare_receiver, strict=True))
    assert rates.decoding_ratios == tuple(
        r / d for r, d in zip(rates.rca_end_to_end, rates.decoding_receiver, strict=True)
    )


def test_zero_rounds_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "ingest", "--rounds", "0"])
    assert exit_info.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err
