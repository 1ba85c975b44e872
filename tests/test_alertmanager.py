"""The real Alertmanager (Debian `prometheus-alertmanager`) posting to a real `rca serve`.

Alerts go in through Alertmanager's API v2; Alertmanager groups them (group_wait 1s) and calls
rca's webhook, which clusters them into incidents. Skips, saying why, when the package is missing
(`make test-deps` installs it).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Server
from tests.debian import ensure_binary

BINARY = "/usr/bin/prometheus-alertmanager"
DEADLINE_S = 60.0  # how long to wait for Alertmanager to deliver (not a speed assertion)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(what: str, probe: Callable[[], Any]) -> Any:
    """Polls `probe` until it returns something truthy; fails naming `what` after DEADLINE_S."""
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        result = probe()
        if result:
            return result
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def alertmanager(tmp_path: Path, server: Server) -> Iterator[str]:
    binary = ensure_binary(BINARY, "prometheus-alertmanager")
    port = _free_port()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        f"""route:
  receiver: rca
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: rca
    webhook_configs:
      - url: {server.api}/webhooks/alertmanager
        send_resolved: true
"""
    )
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    api = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            pytest.fail(f"alertmanager exited: {process.communicate()[1][-2000:]}")
        try:
            return httpx.get(f"{api}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        _wait_for("alertmanager to become ready", ready)
        yield api
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _alert(name: str, service: str, starts: datetime, ends: datetime | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "labels": {"alertname": name, "service": service, "severity": "critical"},
        "annotations": {"summary": f"{service}: {name}"},
        "startsAt": _rfc3339(starts),
        "generatorURL": "http://prometheus.test/graph",
    }
    if ends is not None:
        body["endsAt"] = _rfc3339(ends)
    return body


def _incidents(server: Server) -> list[dict[str, Any]]:
    incidents: list[dict[str, Any]] = httpx.get(f"{server.api}/incidents", timeout=10).json()["incidents"]
    return incidents


def test_alertmanager_delivers_and_rca_clusters(alertmanager: str, server: Server) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    one_fault = [
        _alert("HighErrorRate", "checkout", now - timedelta(seconds=50)),
        _alert("HighLatency", "frontend", now),
    ]
    earlier = _alert("DiskFull", "billing", now - timedelta(hours=3))
    posted = httpx.post(f"{alertmanager}/api/v2/alerts", json=[*one_fault, earlier], timeout=10)
    assert posted.status_code == 200, posted.text

    def delivered() -> list[dict[str, Any]] | None:
        incidents = _incidents(server)
        return incidents if sum(i["alerts"] for i in incidents) == 3 else None

    incidents = _wait_for("all three alerts to reach rca", delivered)
    by_services = {tuple(i["services"]): i for i in incidents}
    assert set(by_services) == {("checkout", "frontend"), ("billing",)}
    fault = by_services[("checkout", "frontend")]
    assert fault["status"] == "open" and fault["alerts"] == 2
    assert fault["started_at"] == _rfc3339(now - timedelta(seconds=50)).replace(".000000", "")

    resolved = [{**a, "endsAt": _rfc3339(now + timedelta(seconds=1))} for a in one_fault]
    assert httpx.post(f"{alertmanager}/api/v2/alerts", json=resolved, timeout=10).status_code == 200

    def fault_resolved() -> bool:
        detail = httpx.get(f"{server.api}/incidents/{fault['id']}", timeout=10).json()
        return bool(detail["status"] == "resolved")

    _wait_for("Alertmanager's resolved notifications", fault_resolved)
    assert [i["id"] for i in _incidents(server) if i["status"] == "open"] == [by_services[("billing",)]["id"]]
