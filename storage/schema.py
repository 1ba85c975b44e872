"""The incident database's tables, and opening it (SQLAlchemy Core; `storage.sql` reads and writes).

Migration: every schema change so far adds a table (`labels` came after the first three), and
opening a database creates the tables it lacks, so an older database file opens as it is and
gains the new ones; its rows are never touched. A change to an existing table would be an
explicit ALTER here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Engine,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

metadata = MetaData()
incidents = Table(
    "incidents",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("status", String(16), nullable=False, index=True),
    Column("started_at_ns", BigInteger, nullable=False, index=True),
    Column("ended_at_ns", BigInteger),
    Column("alert_count", Integer, nullable=False),
    Column("services", JSON, nullable=False),
    Column("updated_ns", BigInteger, nullable=False),
)
alerts = Table(
    "alerts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("incident_id", String(64), ForeignKey("incidents.id"), nullable=False, index=True),
    Column("fingerprint", String(128), nullable=False),
    Column("starts_at_ns", BigInteger, nullable=False),
    Column("ends_at_ns", BigInteger),
    Column("status", String(16), nullable=False),
    Column("service", String(512)),
    Column("labels", JSON, nullable=False),
    Column("annotations", JSON, nullable=False),
    Column("generator_url", Text, nullable=False),
    Column("received_ns", BigInteger, nullable=False),
    UniqueConstraint("fingerprint", "starts_at_ns", name="uq_alert"),
)
rankings = Table(
    "rankings",
    metadata,
    Column("incident_id", String(64), ForeignKey("incidents.id"), primary_key=True),
    Column("alert_nodes", JSON, nullable=False),
    Column("ranking", LargeBinary, nullable=False),  # MessagePack (`storage.ranking_codec`)
    Column("updated_ns", BigInteger, nullable=False),
)
labels = Table(  # responders' feedback, one per incident, with what the model saw (`rca.incidents.feedback`)
    "labels",
    metadata,
    Column("incident_id", String(64), ForeignKey("incidents.id"), primary_key=True),
    Column("node", String(512), nullable=False),
    Column("fault", String(64)),  # NULL: the responder named the node only
    Column("note", Text, nullable=False),
    Column("created_ns", BigInteger, nullable=False),
    Column("alert_nodes", JSON, nullable=False),
    Column("start_ns", BigInteger, nullable=False),
    Column("end_ns", BigInteger, nullable=False),
    Column("evidence", Text, nullable=False),  # JSON (`storage.evidence_codec`)
)


class StoreError(RuntimeError):
    """The database cannot be opened or its tables created."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def open_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for `url` with every table present (the migration: see the module's docstring);
    a plain postgresql:// URL uses the psycopg (3) driver. An SQLite file and its directory are
    created unless `create` is false, when a missing file is an error. Raises StoreError."""
    try:
        parsed = make_url(url)
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            path = Path(parsed.database).expanduser()
            if not create and not path.is_file():
                raise StoreError(f"cannot open {url}: no database file at {path}")
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, pool_pre_ping=parsed.get_backend_name() != "sqlite")
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        metadata.create_all(engine)
    except (SQLAlchemyError, ImportError, OSError) as exc:
        raise StoreError(f"cannot open {url}: {exc}") from exc
    return engine
