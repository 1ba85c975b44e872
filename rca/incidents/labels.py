"""Responders' labels: what they found an incident's root cause to be, and what the model saw."""

from __future__ import annotations

from dataclasses import dataclass

from rca.evidence.nodes import NodeEvidence
from rca.telemetry.faults import Fault


@dataclass(frozen=True, slots=True)
class Label:
    """The root cause a responder found (`POST /incidents/{id}/feedback`)."""

    incident_id: str
    node: str
    fault: Fault | None  # None: they know the node, not the fault class
    note: str
    created_at_ns: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the model saw of the incident when it was labelled: the evidence over the window of
    its ranking and the alerting nodes (`rca fit` may run long after the spans expired)."""

    evidence: NodeEvidence
    alert_nodes: tuple[str, ...]
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class LabelledIncident:
    label: Label
    snapshot: Snapshot

    @property
    def in_evidence(self) -> bool:
        """Whether the labelled node is one the model saw (only then can a fit learn from it)."""
        return self.label.node in self.snapshot.evidence.nodes
