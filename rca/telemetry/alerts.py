"""Alerts as Alertmanager reports them (docs/interface.md, Alerts and incidents), and the graph nodes they point at."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

# The labels that name an alert's service, first present wins (docs/interface.md, Alerts and incidents).
SERVICE_LABELS = ("service", "service_name", "job", "app", "k8s_deployment_name", "deployment")
POD_LABELS = ("pod", "k8s_pod_name")
# Kubernetes name suffixes: a Deployment pod is NAME-<pod-template-hash>-<5 chars>, a bare
# ReplicaSet or DaemonSet pod NAME-<5 chars>; both drawn from k8s' vowel-free alphabet.
_K8S = "[bcdfghjklmnpqrstvwxz2456789]"
_POD_SUFFIX = re.compile(rf"^(?P<name>.+?)(?:-{_K8S}{{6,10}})?-{_K8S}{{5}}$")
_RFC3339 = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<frac>\d{1,9})\d*)?(?P<tz>[Zz]|[+-]\d{2}:\d{2})$"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MIN_NS, _MAX_NS = -(2**63), 2**63 - 1


class AlertStatus(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert of a webhook; the same alert is the same (fingerprint, starts_at_ns)."""

    fingerprint: str
    status: AlertStatus
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at_ns: int
    ends_at_ns: int | None  # None while firing (Alertmanager sends Go's zero time)
    generator_url: str
    service: str | None  # from the labels; None when no service label is present

    @property
    def key(self) -> tuple[str, int]:
        return (self.fingerprint, self.starts_at_ns)


def parse_rfc3339_ns(text: str) -> int | None:
    """Epoch nanoseconds of an RFC3339 time (nanosecond fractions kept exactly); None for Go's
    zero time (year 1), which Alertmanager sends as the `endsAt` of firing alerts. ValueError if
    `text` is not RFC3339 or lies beyond what signed 64-bit nanoseconds hold (years 1678-2262)."""
    match = _RFC3339.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an RFC3339 time")
    try:
        moment = datetime.fromisoformat(f"{match['date']}T{match['time']}{match['tz'].upper().replace('Z', '+00:00')}")
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if moment.year == 1:
        return None
    seconds = (moment - _EPOCH) // timedelta(seconds=1)
    ns = seconds * 1_000_000_000 + int((match["frac"] or "0").ljust(9, "0"))
    if not _MIN_NS <= ns <= _MAX_NS:  # what a signed 64-bit count of nanoseconds holds (SQLite's too)
        raise ValueError(f"{text!r} lies outside the years 1678-2262 that nanoseconds since 1970 can hold")
    return ns


def format_rfc3339(ns: int) -> str:
    """RFC3339 in UTC with nanoseconds where there are any: `2026-12-02T07:45:04.5Z`."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{fraction:09d}".rstrip("0") + "Z" if fraction else f"{text}Z"


def strip_pod_suffix(pod: str) -> str:
    """`checkout-7d9f8b6c5d-x2x4z` → `checkout`; names without a k8s suffix stay as they are."""
    match = _POD_SUFFIX.match(pod)
    return match["name"] if match else pod


def service_of(labels: Mapping[str, str]) -> str | None:
    """The alert's service by the interface's label precedence, or None."""
    for key in SERVICE_LABELS:
        if labels.get(key):
            return labels[key]
    for key in POD_LABELS:
        if labels.get(key):
            return strip_pod_suffix(labels[key])
    return None


def fingerprint_of(labels: Mapping[str, str]) -> str:
    """A stable fingerprint of a label set, for senders that give none (Alertmanager always does)."""
    text = "\xff".join(f"{k}\xfe{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def nodes_for(
    service: str | None, *, known: Collection[str], traced: Sequence[str], roots: Sequence[str]
) -> tuple[str, ...]:
    """The graph nodes an alert on `service` points at, never none: the node itself when the graph
    knows it, else the traced service nearest by name, else the trace roots (else the name itself)."""
    if service is not None and service in known:
        return (service,)
    if service is not None:
        near = difflib.get_close_matches(service, traced, n=1, cutoff=0.6)
        contains = [t for t in traced if t in service or service in t]
        if near or contains:
            return (near[0] if near else min(contains, key=lambda t: (abs(len(t) - len(service)), t)),)
    if roots:
        return tuple(sorted(roots))
    return (service,) if service is not None else ()
