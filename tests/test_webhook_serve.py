"""A real `rca serve`: the webhook answers, and incidents survive a restart (SIGTERM)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import start_server, stop_server


def _get(api: str, path: str) -> Any:
    response = httpx.get(f"{api}{path}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_incidents_survive_a_restart(tmp_path: Path, datasets: Path) -> None:
    firing = json.loads((datasets / "alertmanager" / "firing-0.25.0.json").read_text())
    server = start_server(tmp_path)
    try:
        response = httpx.post(f"{server.api}/webhooks/alertmanager", json=firing, timeout=30)
        assert response.status_code == 200, response.text
        (summary,) = response.json()["incidents"]
        paths = ["/incidents", f"/incidents/{summary['id']}", f"/incidents/{summary['id']}/causes"]
        before = [_get(server.api, p) for p in paths]
    finally:
        assert stop_server(server) == 0
    assert before[0]["incidents"] == [summary]
    assert before[1]["alerts"][0]["fingerprint"] == "7d2d332feada5c59"

    restarted = start_server(tmp_path)
    try:
        assert [_get(restarted.api, p) for p in paths] == before
        again = httpx.post(f"{restarted.api}/webhooks/alertmanager", json=firing, timeout=30)
        assert again.json()["incidents"] == [summary]  # the re-sent group is the same alert
    finally:
        assert stop_server(restarted) == 0
