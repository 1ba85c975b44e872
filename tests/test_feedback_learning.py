"""Learning from responders, end to end: incidents labelled through the API, `rca fit`, and held-back
incidents of the same family ranked with the refit parameters (`rca serve --params` included).

The family: a tensor-parallel rank's NCCL communication slows, in the real style (what vLLM,
DCGM, kubelet and node_exporter emit: the GPUs' links seen in metrics alone, unlike the span
conventions the shipped parameters were fitted on, as production differs from any simulator).
Responders label six such incidents; four more (other seeds) are held back from the fit. They
are ranked by the shipped parameters, by a refit on the labels and a few simulated cases of other
classes, and by a refit on the same simulated cases alone, so that the test fails if the labels
are ignored.

Found by experiment (labelled seeds 201-206, held-out 221-224, the same five simulated cases),
with the parameters shipped on 2026-12-07 (9c66530c8dc2): the shipped parameters rank 3 of 4
held-out truths first (the fourth 10th at 0.04), the refit with the labels 4 of 4 (at 0.29 and
1.00), the simulated cases alone 3 of 4 (the fourth 16th at 0.02). With those fitted on cases
where unrelated services drift (session 19): shipped 3 of 4 (the fourth 17th at 0.02), refit 4 of
4 (the weakest at 0.29), simulated alone 3 of 4 (the fourth 12th at 0.03).
(The families used before, a failing datastore and then a slow rank's NCCL in the `shifted`
profile, are now ranked first by the shipped parameters: no refit on a few cases ranks them
better. The second went when a communicator's quiet peers came to count as one missing stall.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from models.health import HealthParams, load_params, params_version
from models.params_file import read_params
from models.ranker import BayesianRanker
from rca.app.cli import main
from rca.app.compose import Service
from rca.app.config import Settings
from rca.incidents.labels import LabelledIncident
from simulation import Truth, simulate
from storage.sql import SqlIncidentStore
from tests.incidentcase import PAST_ALERT_NS, _first_alert_ns

FAMILY, STYLE = "llm-nccl_communication", "real"
LABELLED_SEEDS = (201, 202, 203, 204, 205, 206)
HELD_OUT_SEEDS = (221, 222, 223, 224)
SIMULATED = [
    "--sim-scenarios",
    "llm-latency,llm-errors,llm-gpu_memory_bandwidth,llm-kv_cache_fragmentation,llm-numa_mismatch",
    "--sim-seeds",
    "1",
]
FLOOR = 1e-3  # a truth given less counts as this much (log-probabilities stay finite)


@contextmanager
def _serving(db: Path, params: Path | None = None) -> Iterator[tuple[Service, TestClient]]:
    service = Service(Settings(db=f"sqlite:///{db}", params=params))
    try:
        with TestClient(service.api) as client:
            yield service, client
    finally:
        service.writer.close()
        service.store.close()


def _replay(service: Service, client: TestClient, seed: int) -> tuple[str, Truth]:
    """A case's spans and logs up to a minute past its first alert, then the webhooks sent by then."""
    case = simulate(FAMILY, seed=seed, style=STYLE)
    cut = _first_alert_ns(case) + PAST_ALERT_NS
    for spans in case.batches:
        service.writer.submit(spans.ended_before(cut))
    for logs in case.logs:
        service.writer.submit(logs.select(logs.time_ns < cut))
    for points in case.metrics:
        service.writer.submit(points.select(points.time_ns < cut))
    incident = ""
    for sent_ns, webhook in zip(case.webhook_times_ns, case.webhooks, strict=True):
        if sent_ns < cut:
            answer = client.post("/webhooks/alertmanager", json=webhook)
            assert answer.status_code == 200, answer.text
            incident = incident or answer.json()["incidents"][0]["id"]
    assert incident
    return incident, case.truth


def _served_truth(client: TestClient, incident: str, truth: Truth) -> tuple[int, float, str]:
    """The truth's rank and probability in the incident's CAUSES, and the model's name."""
    causes = client.get(f"/incidents/{incident}/causes").json()
    found = [(c["rank"], c["probability"]) for c in causes["causes"] if c["node"] == truth.node]
    rank, probability = found[0] if found else (len(causes["causes"]) + 1, 0.0)
    return rank, probability, causes["model"]["name"]


def _label_all(db: Path, seeds: tuple[int, ...]) -> list[tuple[int, float]]:
    """Replays the cases into `rca serve` (shipped parameters) and labels each through the API;
    returns the truth's rank and probability the service gave each."""
    served = []
    with _serving(db) as (service, client):
        for seed in seeds:
            incident, truth = _replay(service, client, seed)
            served.append(_served_truth(client, incident, truth)[:2])
            fault = None if seed == seeds[-1] else truth.fault  # one responder named the node only
            answer = client.post(f"/incidents/{incident}/feedback", json={"node": truth.node, "fault": fault})
            assert answer.status_code == 200 and answer.json()["in_evidence"] is True
    return served


def _ranked(labelled: LabelledIncident, params: HealthParams) -> tuple[int, float]:
    """The truth's rank and probability from the evidence the service saw, under `params`."""
    snapshot = labelled.snapshot
    causes = BayesianRanker(params=params).causes(snapshot.evidence, snapshot.alert_nodes)
    (cause,) = [c for c in causes if c.node == labelled.label.node]
    return cause.rank, cause.probability


def _fit(db: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["fit", "--db", f"sqlite:///{db}", "--out", str(out), *SIMULATED]) == 0
    summary: dict[str, object] = json.loads(capsys.readouterr().out)
    return summary


def _score(ranked: list[tuple[int, float]]) -> tuple[int, float]:
    """How many truths are ranked first, and their mean log-probability."""
    return sum(rank == 1 for rank, _ in ranked), sum(math.log(max(p, FLOOR)) for _, p in ranked) / len(ranked)


def test_labels_teach_the_model_a_family_it_ranked_weakly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels, held_back, unlabelled = tmp_path / "labels.db", tmp_path / "held-back.db", tmp_path / "unlabelled.db"
    _label_all(labels, LABELLED_SEEDS)
    served_shipped = _label_all(held_back, HELD_OUT_SEEDS)  # labelled too, in a database rca fit is not given
    SqlIncidentStore.open(f"sqlite:///{unlabelled}").close()

    with_labels, without = tmp_path / "with-labels.json", tmp_path / "without-labels.json"
    summary = _fit(labels, with_labels, capsys)
    assert (summary["labelled"], summary["labelled_used"], summary["simulated"]) == (6, 6, 5)
    summary = _fit(unlabelled, without, capsys)
    assert (summary["labelled"], summary["simulated"]) == (0, 5)

    store = SqlIncidentStore.open(f"sqlite:///{held_back}")
    held, _ = store.labelled()
    store.close()
    shipped = [_ranked(x, load_params()) for x in held]
    refit = [_ranked(x, read_params(with_labels)) for x in held]
    simulated_only = [_ranked(x, read_params(without)) for x in held]
    print(f"held-out truths (rank, probability): shipped {shipped}, refit {refit}, simulated only {simulated_only}")
    assert [r for r, _ in shipped] == [r for r, _ in served_shipped]  # the snapshots are what was ranked

    (shipped_first, shipped_log_p), (refit_first, refit_log_p) = _score(shipped), _score(refit)
    simulated_first, simulated_log_p = _score(simulated_only)
    assert refit_first >= shipped_first and refit_log_p > shipped_log_p
    assert refit_first > simulated_first and refit_log_p > simulated_log_p  # the labels are not ignored

    with _serving(tmp_path / "refit.db", with_labels) as (service, client):  # rca serve --params, end to end
        rank, probability, name = _served_truth(client, *_replay(service, client, HELD_OUT_SEEDS[0]))
    assert name.endswith(f"@{params_version(read_params(with_labels))}")
    assert (rank, probability) == pytest.approx(refit[0], abs=1e-6)
