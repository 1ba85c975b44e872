"""Incremental clustering of alerts into incidents (DBSCAN on a precomputed distance).

The distance of two alerts adds three terms; alerts closer than `threshold` link, and linked
alerts form one incident (DBSCAN with min_samples=1 is single linkage cut at `eps`):
- time: the gap between their startsAt over `time_scale_s`;
- graph: undirected hops between their nodes over `hop_scale`; `unconnected` when both nodes are
  in the graph but no path joins them, `unknown` when either has no traffic in the range;
- labels: `label_weight` times one minus the Jaccard similarity of their label pairs, leaving out
  the labels that name the service (the graph term covers those).
Assignment is incremental: alerts already placed stay where they are (incidents never split or
vanish); new alerts join the oldest incident of their cluster, or open a new one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from sklearn.cluster import DBSCAN

from rca.incidents.model import Incident, incident_id
from rca.incidents.topology import UNCONNECTED, CallTopology
from rca.telemetry.alerts import POD_LABELS, SERVICE_LABELS, Alert

_SERVICE_KEYS = frozenset(SERVICE_LABELS + POD_LABELS)
_APART = 1e6  # placed alerts of different incidents never link


class AlertClusterer:
    """Places new alerts into incidents; see the module docstring for the distance."""

    def __init__(
        self,
        *,
        threshold: float = 1.0,
        time_scale_s: float = 900.0,
        hop_scale: float = 8.0,
        unconnected: float = 2.0,
        unknown: float = 0.5,
        label_weight: float = 0.25,
    ) -> None:
        self.threshold = threshold
        self.time_scale_s = time_scale_s
        self.hop_scale = hop_scale
        self.unconnected = unconnected
        self.unknown = unknown
        self.label_weight = label_weight

    @property
    def reach_ns(self) -> int:
        """Alerts further apart in time than this never link."""
        return int(self.threshold * self.time_scale_s * 1e9)

    def distances(
        self, alerts: Sequence[Alert], topology: CallTopology, *, fresh: int | None = None
    ) -> npt.NDArray[np.float64]:
        """The pairwise distance matrix of `alerts`; with `fresh`, only pairs involving one of the
        first `fresh` alerts get graph and label terms (the caller decides the others)."""
        starts = np.array([a.starts_at_ns for a in alerts], np.float64)
        d = np.abs(starts[:, None] - starts[None, :]) / (self.time_scale_s * 1e9)
        nodes = [topology.nodes_for(a.service) for a in alerts]
        pairs = [frozenset((k, v) for k, v in a.labels.items() if k not in _SERVICE_KEYS) for a in alerts]
        for i in range(len(alerts) if fresh is None else fresh):
            for j in range(i + 1, len(alerts)):
                g = self._graph_term(topology, nodes[i], nodes[j])
                union = len(pairs[i] | pairs[j])
                similarity = len(pairs[i] & pairs[j]) / union if union else 1.0
                extra = g + self.label_weight * (1.0 - similarity)
                d[i, j] += extra
                d[j, i] += extra
        return d

    def _graph_term(self, topology: CallTopology, a: Sequence[str], b: Sequence[str]) -> float:
        if set(a) & set(b):
            return 0.0
        if not any(n in topology.links for n in a) or not any(n in topology.links for n in b):
            return self.unknown
        hops = topology.hops(a, b)
        return self.unconnected if hops == UNCONNECTED else hops / self.hop_scale

    def assign(
        self, new: Sequence[Alert], placed: Sequence[tuple[Alert, Incident]], topology: CallTopology
    ) -> list[str]:
        """The incident id of every alert in `new`, given alerts already `placed` in incidents."""
        if not new:
            return []
        alerts = [*new, *(a for a, _ in placed)]
        n = len(new)
        d = self.distances(alerts, topology, fresh=n)
        owners = [i.id for _, i in placed]
        if placed:
            same = np.equal.outer(np.array(owners, object), np.array(owners, object))
            d[n:, n:] = np.where(same, 0.0, _APART)
        labels = DBSCAN(eps=self.threshold, min_samples=1, metric="precomputed").fit(d).labels_
        incidents = {i.id: i for _, i in placed}
        ids: list[str] = []
        for k in range(n):
            members = np.flatnonzero(labels == labels[k]).tolist()
            existing = [incidents[owners[m - n]] for m in members if m >= n]
            if existing:
                ids.append(min(existing, key=lambda i: (i.started_at_ns, i.id)).id)
            else:
                founder = min((new[m] for m in members), key=lambda a: (a.starts_at_ns, a.fingerprint))
                ids.append(incident_id(founder))
        return ids
