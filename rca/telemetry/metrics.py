"""Metric data points: the columnar form every metric decoder produces and the graph consumes.

One row per data point. A row carries its node (interface: metrics): the service its resource
or Prometheus labels name, a GPU `gpu:{host}/{index}` owned by the pod the exporter names, or a
host `host:{name}` for host-wide series (node_exporter). `series` identifies the time series
(the metric name and every attribute) for rates and resets; `kind` says how the value reads.
Histograms carry their sum and count, and their bucket counts for the p95.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from rca.telemetry.alerts import strip_pod_suffix
from rca.telemetry.spans import Rejection, Rejections

UNKNOWN_SERVICE = "unknown_service"
GPU_PREFIX = "gpu:"
HOST_PREFIX = "host:"
# Attributes that place a point (resource or point attributes; Prometheus labels arrive as
# point attributes through a Collector's prometheus receiver, `job` as `service.name`).
POD_KEYS = ("exported_pod", "pod", "k8s.pod.name")  # the workload's pod before the scraper's
RESOURCE_SERVICE_KEYS = ("service.name", "k8s.deployment.name")
LABEL_SERVICE_KEYS = ("k8s.deployment.name", "service", "job")
GPU_KEYS = ("gpu", "gpu.index", "hw.id", "UUID")
# A Collector's prometheus receiver moves `instance` to the resource as `service.instance.id`
# (and `server.address`).
HOST_KEYS = ("host.name", "Hostname", "k8s.node.name", "instance", "service.instance.id", "server.address")
HOST_WIDE_PREFIX = "node_"  # node_exporter: a host's series, not a service's
PLACEMENT_KEYS = frozenset({*POD_KEYS, *RESOURCE_SERVICE_KEYS, *LABEL_SERVICE_KEYS, *GPU_KEYS, *HOST_KEYS})


class MetricKind(IntEnum):
    """How a point's value reads."""

    GAUGE = 0  # a level: averaged per window
    CUMULATIVE = 1  # a running total since `start_ns`: a per-second rate between points
    DELTA = 2  # the total over [start_ns, time_ns]: a per-second rate over that interval
    HISTOGRAM_CUMULATIVE = 3  # sum and count (and buckets) since `start_ns`
    HISTOGRAM_DELTA = 4  # sum and count (and buckets) over [start_ns, time_ns]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a point belongs: its node, the service owning it (None: itself, or for a GPU
    unknown, to be found from spans), whether the node is a GPU or a host, and the pod it names:
    for a GPU its exporter's (one engine instance: the replicas of a service run apart), for a
    service the instance it came from."""

    node: str
    owner: str | None = None
    gpu: bool = False
    host: bool = False
    pod: str | None = None


def _first(keys: Sequence[str], *where: Mapping[str, str], skip: Collection[str | None] = ()) -> str:
    for attributes in where:
        for key in keys:
            value = attributes.get(key)
            if value and value not in skip:
                return value
    return ""


def _host(point: Mapping[str, str], resource: Mapping[str, str]) -> str:
    """The first host attribute that is not a pod's own name: an exporter in a container without
    the host's network reports its pod as `Hostname` (dcgm-exporter before NODE_NAME was read),
    and the scraping agent's `host.name` says where it runs."""
    pods = {where.get(key) for where in (point, resource) for key in POD_KEYS}
    return _first(HOST_KEYS, point, resource, skip=pods)


def place(metric: str, resource: Mapping[str, str], point: Mapping[str, str]) -> Placement:
    """The node of a point of `metric` with these resource and point attributes (string values;
    interface: metrics): a GPU index with a host makes `gpu:{host}/{index}` owned by the pod the
    exporter names; a pod label (the workload's, `exported_pod` before `pod`) names the service
    over the scraper's `service.name`; else the resource's `service.name` or deployment, a
    `k8s.pod.name`, a `service` or `job` label. A node_exporter (`node_…`) series belongs to
    its host."""
    pod = _first(POD_KEYS, point, resource)
    workload = strip_pod_suffix(pod) if pod else ""
    gpu = _first(GPU_KEYS, point, resource)
    host = _host(point, resource)
    if ":" in host and host.rsplit(":", 1)[1].isdigit():  # Prometheus `instance`: host:port
        host = host.rsplit(":", 1)[0]
    if gpu and host:
        return Placement(f"{GPU_PREFIX}{host}/{gpu}", workload or None, gpu=True, pod=pod or None)
    if metric.startswith(HOST_WIDE_PREFIX) and host:  # whichever pod runs the exporter
        return Placement(f"{HOST_PREFIX}{host}", host=True)
    if workload:
        return Placement(workload, pod=pod)
    service = _first(RESOURCE_SERVICE_KEYS, resource) or _first(LABEL_SERVICE_KEYS, point, resource)
    return Placement(service or UNKNOWN_SERVICE)


@dataclass(frozen=True, slots=True)
class MetricBatch:
    """Columnar data points. `name`, `node`, `owner` and `pod` index `strings` (`owner` and `pod`
    -1: none named; `pod` `Placement.pod`); `placement` is 0 for a service, 1 for a GPU,
    2 for a host. Histogram rows have `count` and,
    where they came with buckets, `bucket_bounds`/`bucket_counts` entries (None elsewhere)."""

    time_ns: npt.NDArray[np.int64]
    start_ns: npt.NDArray[np.int64]  # 0: unknown
    series: npt.NDArray[np.uint64]
    name: npt.NDArray[np.int32]
    node: npt.NDArray[np.int32]
    owner: npt.NDArray[np.int32]
    pod: npt.NDArray[np.int32]
    placement: npt.NDArray[np.int8]
    kind: npt.NDArray[np.int8]
    value: npt.NDArray[np.float64]  # gauge or sum value; a histogram's sum
    count: npt.NDArray[np.float64]  # a histogram's count, 0 elsewhere
    bucket_bounds: tuple[tuple[float, ...] | None, ...]
    bucket_counts: tuple[tuple[float, ...] | None, ...]
    strings: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.time_ns.shape[0])

    @staticmethod
    def empty() -> MetricBatch:
        return MetricBatch(
            time_ns=np.zeros(0, np.int64),
            start_ns=np.zeros(0, np.int64),
            series=np.zeros(0, np.uint64),
            name=np.zeros(0, np.int32),
            node=np.zeros(0, np.int32),
            owner=np.zeros(0, np.int32),
            pod=np.zeros(0, np.int32),
            placement=np.zeros(0, np.int8),
            kind=np.zeros(0, np.int8),
            value=np.zeros(0),
            count=np.zeros(0),
            bucket_bounds=(),
            bucket_counts=(),
            strings=(),
        )

    def select(self, mask: npt.NDArray[np.bool_]) -> MetricBatch:
        """The rows where `mask` holds, sharing the string table."""
        keep = mask.tolist()
        return MetricBatch(
            time_ns=self.time_ns[mask],
            start_ns=self.start_ns[mask],
            series=self.series[mask],
            name=self.name[mask],
            node=self.node[mask],
            owner=self.owner[mask],
            pod=self.pod[mask],
            placement=self.placement[mask],
            kind=self.kind[mask],
            value=self.value[mask],
            count=self.count[mask],
            bucket_bounds=tuple(b for b, k in zip(self.bucket_bounds, keep, strict=True) if k),
            bucket_counts=tuple(c for c, k in zip(self.bucket_counts, keep, strict=True) if k),
            strings=self.strings,
        )


PLACED_SERVICE, PLACED_GPU, PLACED_HOST = 0, 1, 2


def concat_metrics(batches: Sequence[MetricBatch]) -> MetricBatch:
    """One batch holding the rows of all `batches`, their string tables laid end to end."""
    if len(batches) == 1:
        return batches[0]
    offsets = np.cumsum([0, *(len(b.strings) for b in batches[:-1])]).tolist()

    def shifted(column: str) -> npt.NDArray[np.int32]:
        parts = [getattr(b, column) for b in batches]
        return np.concatenate([np.where(p >= 0, p + np.int32(o), p) for p, o in zip(parts, offsets, strict=True)])

    return MetricBatch(
        time_ns=np.concatenate([b.time_ns for b in batches]),
        start_ns=np.concatenate([b.start_ns for b in batches]),
        series=np.concatenate([b.series for b in batches]),
        name=shifted("name"),
        node=shifted("node"),
        owner=shifted("owner"),
        pod=shifted("pod"),
        placement=np.concatenate([b.placement for b in batches]),
        kind=np.concatenate([b.kind for b in batches]),
        value=np.concatenate([b.value for b in batches]),
        count=np.concatenate([b.count for b in batches]),
        bucket_bounds=tuple(x for b in batches for x in b.bucket_bounds),
        bucket_counts=tuple(x for b in batches for x in b.bucket_counts),
        strings=tuple(s for b in batches for s in b.strings),
    )


@dataclass(frozen=True, slots=True)
class MetricDecodeResult(Rejections):
    """What a metric decoder made of one request: the accepted points and the rejected ones."""

    UNIT: ClassVar[str] = "data point"
    batch: MetricBatch
    rejections: tuple[Rejection, ...] = ()
