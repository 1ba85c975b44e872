"""`rca analyze` ranks the root cause of simulated case files, offline, with and without alerts."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rca.app.compose import analyze


@pytest.fixture(scope="module")
def case_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("case")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rca.app.cli",
            "simulate",
            "llm-kv_cache_fragmentation",
            "--out",
            str(out),
            "--seed",
            "4",
            "--rate",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return out


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rca.app.cli", "analyze", *args], capture_output=True, text=True)


def test_analyze_with_alerts_names_the_faulty_gpu(case_dir: Path) -> None:
    done = _analyze("--traces", str(case_dir / "traces.pb"), "--alerts", str(case_dir / "webhooks" / "0001.json"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    truth = json.loads((case_dir / "truth.json").read_text())
    top = report["causes"][0]
    # The node, not the class: over the whole file at this rate a KV fault's strongest reading is
    # its GPU's compute time (latency); the bench scores the class a minute past the alert.
    assert top["node"] == truth["node"] and top["fault"] in (truth["fault"], "latency")
    assert top["path"][0] == truth["node"] and top["path"][-1] in report["alerting"]
    assert sum(c["probability"] for c in report["causes"]) == pytest.approx(1.0)
    assert [c["rank"] for c in report["causes"]] == list(range(1, len(report["causes"]) + 1))
    for cause in report["causes"]:  # the cause's own class's reading first, then only shifted others
        assert cause["evidence"] and all(e["score"] > 0 for e in cause["evidence"][1:])


def test_analyze_without_alerts_ranks_from_the_trace_roots(case_dir: Path) -> None:
    out = io.StringIO()
    assert analyze([str(case_dir / "traces.json")], out=out) == 0
    report = json.loads(out.getvalue())
    assert report["alerting"] and report["causes"]


def test_analyze_refuses_a_malformed_webhook_naming_the_field(
    case_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": "4", "alerts": [{"labels": {}}]}))
    assert analyze([str(case_dir / "traces.pb")], str(bad), out=io.StringIO()) == 2
    assert "not an Alertmanager webhook body" in capsys.readouterr().err
