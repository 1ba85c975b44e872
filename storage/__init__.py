"""The database adapter: incidents, alerts, rankings and labels in SQLite or PostgreSQL
(SQLAlchemy Core), implementing `rca.incidents.store.IncidentStore`."""
