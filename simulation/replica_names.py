"""Engine replicas under one set of service names, as the pods of one Kubernetes Deployment are.

The topology names each replica apart (`vllm-engine-b`, `vllm-worker-b-{k}`) so the simulation can
address it; a real deployment's replicas usually share `service.name` and differ only in their
resource (host, pod) and communicator (`nccl.comm_id`). With `shared` the exported telemetry is
renamed so: every replica's engine and ranks carry the first replica's names, and so do their
pods' names (`{workload}-{hash}-{id}`, as one Deployment's), while hosts, GPU nodes, pods and
communicator ids stay each replica's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from rca.telemetry.alerts import strip_pod_suffix
from rca.telemetry.logs import LogBatch
from rca.telemetry.metrics import MetricBatch
from rca.telemetry.spans import SpanBatch
from simulation.topology import LlmCluster

REPLICA_NAMES = ("distinct", "shared")
Named = TypeVar("Named", SpanBatch, LogBatch, MetricBatch)


def shared_names(engines: Sequence[LlmCluster]) -> dict[str, str]:
    """Each later replica's engine and rank service names mapped to the first replica's."""
    if not engines:
        return {}
    first = engines[0]
    names: dict[str, str] = {}
    for other in engines[1:]:
        names[other.engine] = first.engine
        names.update(zip(other.workers, first.workers, strict=True))
    return names


def renamed(table: Named, names: Mapping[str, str]) -> Named:
    """A span, log or metric batch with every string that is a renamed service's name replaced,
    and every pod name of one its workload (hosts and log text keep theirs)."""
    if not names:
        return table
    return replace(table, strings=tuple(_renamed(s, names) for s in table.strings))


def _renamed(text: str, names: Mapping[str, str]) -> str:
    if text in names:
        return names[text]
    workload = strip_pod_suffix(text)
    return names[workload] + text[len(workload) :] if workload in names else text
