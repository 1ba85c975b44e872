"""The incident store on a real SQLite file: round trips, uniqueness, resolution, reopening."""

from __future__ import annotations

import glob
import importlib.util
import math
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import IntegrityError

from rca.incidents.model import AlertPlacement, IncidentStatus, StoredRanking
from rca.ranking.causes import Cause, Evidence, Ranking
from rca.telemetry.alerts import AlertStatus
from rca.telemetry.faults import Fault
from storage.sql import SqlIncidentStore, metadata
from tests.spanfactory import T0
from tests.test_incidents_service import S, alert

RANKING = Ranking(
    start_ns=T0 - 300 * S,
    end_ns=T0 + 1,
    model="m",
    inference_ms=1.25,
    causes=(
        Cause(
            1,
            "gpu:h1/0",
            "vllm-worker-0",
            Fault.GPU_MEMORY_BANDWIDTH,
            0.75,
            (Evidence("dram", 0.97, 0.4, 6.5),),
            ("gpu:h1/0", "vllm-worker-0", "gateway"),
        ),
        Cause(
            2,
            "gateway",
            "gateway",
            Fault.LATENCY,
            0.25,
            (Evidence("self_time", math.nan, 0.1, math.inf),),
            ("gateway",),
        ),
    ),
    onset_ns=T0 - 60 * S,
)


def _as_postgres(*command: str) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the postgres user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server on 127.0.0.1 (Debian's binaries), or a skip saying what is missing."""
    bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not bins or importlib.util.find_spec("psycopg") is None:
        pytest.skip("PostgreSQL server binaries or the psycopg driver missing (apt-get install postgresql)")
    bin_dir = Path(bins[-1]).parent
    root = Path(tempfile.mkdtemp(prefix="rca-pg-"))  # not under pytest's tmp: the postgres user must reach it
    root.chmod(0o777)
    data = root / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run(
        _as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "rca", "--no-sync"),
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
    subprocess.run(_as_postgres(*start), check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql://rca@127.0.0.1:{port}/postgres"
    finally:
        stop = [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]
        subprocess.run(_as_postgres(*stop), capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database: an SQLite file, or a PostgreSQL database emptied of rca's tables."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/rca.db"
    server: str = request.getfixturevalue("postgres")
    engine = create_engine(server.replace("postgresql://", "postgresql+psycopg://"))
    metadata.drop_all(engine)
    engine.dispose()
    return server


def test_parent_directory_is_created_and_sqlite_runs_in_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "rca.db"
    store = SqlIncidentStore.open(f"sqlite:///{path}")
    store.record([AlertPlacement(alert("checkout", 0), "inc-1")], [], T0)
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT count(*) FROM alerts").fetchone() == (1,)


def test_round_trip_survives_reopening(url: str) -> None:
    store = SqlIncidentStore.open(url)
    a, b = alert("checkout", 0), alert("gateway", 30, name="HighErrorRate")
    assert store.record([AlertPlacement(a, "inc-1"), AlertPlacement(b, "inc-1")], [], T0) == ["inc-1"]
    store.save_ranking("inc-1", StoredRanking(RANKING, ("checkout", "gateway")), T0)
    store.close()

    again = SqlIncidentStore.open(url)
    incident = again.incident("inc-1")
    assert incident is not None
    assert (incident.status, incident.started_at_ns, incident.alerts) == (IncidentStatus.OPEN, a.starts_at_ns, 2)
    assert incident.services == ("checkout", "gateway")
    assert again.alerts_of("inc-1") == [a, b]
    stored = again.rankings(["inc-1"])["inc-1"]
    assert stored.alert_nodes == ("checkout", "gateway")
    assert stored.ranking.causes[0] == RANKING.causes[0] and stored.ranking.onset_ns == RANKING.onset_ns
    assert math.isnan(stored.ranking.causes[1].evidence[0].observed)
    assert again.placed([a.key, ("nope", 1)]) == {a.key: AlertPlacement(a, "inc-1")}
    again.close()


def test_the_same_alert_cannot_be_stored_twice(url: str) -> None:
    store = SqlIncidentStore.open(url)
    store.record([AlertPlacement(alert("checkout", 0), "inc-1")], [], T0)
    with pytest.raises(IntegrityError):
        store.record([AlertPlacement(alert("checkout", 0), "inc-2")], [], T0)
    assert store.incident("inc-2") is None  # the failed transaction left nothing behind
    store.close()


def test_resolution_and_listing(url: str) -> None:
    store = SqlIncidentStore.open(url)
    a, b = alert("checkout", 0), alert("search", 600)
    store.record([AlertPlacement(a, "inc-a"), AlertPlacement(b, "inc-b")], [], T0)
    assert [i.id for i in store.incidents()] == ["inc-b", "inc-a"]  # newest first
    assert [x.id for _, x in store.open_alerts(T0 - S, T0 + S)] == ["inc-a"]
    touched = store.record([], [replace(a, status=AlertStatus.RESOLVED, ends_at_ns=T0 + 99 * S)], T0)
    assert touched == ["inc-a"]
    resolved = store.incident("inc-a")
    assert resolved is not None and resolved.status is IncidentStatus.RESOLVED and resolved.ended_at_ns == T0 + 99 * S
    assert [i.id for i in store.incidents(IncidentStatus.OPEN)] == ["inc-b"]
    assert [i.id for i in store.incidents(IncidentStatus.RESOLVED, limit=1)] == ["inc-a"]
    assert store.open_alerts(T0 - S, T0 + S) == []
    store.close()
