"""Grafana-style time parameters: RFC3339 or epoch milliseconds."""

from __future__ import annotations

from datetime import datetime


def parse_time_ns(text: str) -> int:
    """Epoch nanoseconds of `text`, an RFC3339 time or epoch milliseconds; ValueError if neither."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped) * 1_000_000
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither RFC3339 nor epoch milliseconds") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone offset (RFC3339 needs one)")
    return int(moment.timestamp() * 1e9)
