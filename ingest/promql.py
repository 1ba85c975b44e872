"""The PromQL a ranking asks a Prometheus-compatible API (docs/interface.md, Metrics): three grouped queries
that return the raw samples of a time range (a range selector evaluated as an instant query), so
rca reduces them to its own windows exactly as it does points sent to it.

Raw samples rather than `rate(x[w])` or `avg_over_time(x[w])` per window: a rate needs two samples
in its range, so over a 10 s window and 15 s scrapes it mostly has none, and over a longer range
evaluated every window it is a moving average, whose neighbouring windows share samples and look
like a change where there is none. Samples are partitioned by window instead: a gauge's samples
are averaged in theirs, a counter's increase since its previous sample (a drop is a reset) counts
in the window of the later sample, as a rate for a metric and as a count for the call statistics.

- `metrics`: every name the metric table maps, in its Prometheus spellings; for histograms (names
  the table maps that are not counters) their `_sum` and `_count` series, read as the mean.
- `service_graph`: the servicegraph connector's (and Tempo's) counters by client and server.
- `span_metrics`: span metrics' calls and seconds of the services' own (server or consumer) spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from rca.telemetry.metric_table import MetricTable

KNOWN_COUNTERS = frozenset({"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"})  # counters not spelt `_total`
SERVICE_GRAPH = {  # sample name → CallStats column (`ingest.prometheus_results.FIELDS`)
    "traces_service_graph_request_total": "calls",
    "traces_service_graph_request_failed_total": "failed",
    "traces_service_graph_request_server_seconds_sum": "server_seconds",
    "traces_service_graph_request_client_seconds_sum": "client_seconds",
}
SPAN_METRICS = {
    "traces_span_metrics_calls_total": "calls",
    "traces_span_metrics_duration_seconds_sum": "server_seconds",
}
ENTRY_SPANS = 'span_kind=~"SPAN_KIND_SERVER|SPAN_KIND_CONSUMER|"'  # a service's own requests (or no kind)
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


class SampleRole(IntEnum):
    """How a sample of a mapped metric reads."""

    GAUGE = 0
    COUNTER = 1
    HISTOGRAM_SUM = 2
    HISTOGRAM_COUNT = 3


@dataclass(frozen=True, slots=True)
class MappedName:
    """A Prometheus sample name of a mapped metric: the table's name for it, and how it reads."""

    metric: str
    role: SampleRole


def string(text: str) -> str:
    """A PromQL string literal (JSON's escapes are Go's)."""
    return json.dumps(text)


def duration(ms: int) -> str:
    return f"{ms}ms"


def prometheus_names(name: str) -> tuple[str, ...]:
    """The names a table entry may have in Prometheus: as written, and with the characters
    Prometheus does not allow replaced (OpenTelemetry's dotted names arrive so)."""
    sanitized = _INVALID.sub("_", name)
    return tuple(dict.fromkeys([name, "_" + sanitized if sanitized[:1].isdigit() else sanitized]))


def is_counter(name: str) -> bool:
    return name.endswith("_total") or name in KNOWN_COUNTERS


def mapped_names(table: MetricTable) -> dict[str, MappedName]:
    """Every sample name the `metrics` query asks for, to the table's metric and its role."""
    names: dict[str, MappedName] = {}
    for metric in table.names():
        for p in prometheus_names(metric):
            if is_counter(metric):
                names.setdefault(p, MappedName(metric, SampleRole.COUNTER))
                continue
            names.setdefault(p, MappedName(metric, SampleRole.GAUGE))
            names.setdefault(f"{p}_sum", MappedName(metric, SampleRole.HISTOGRAM_SUM))
            names.setdefault(f"{p}_count", MappedName(metric, SampleRole.HISTOGRAM_COUNT))
    return names


def selector(names: Iterable[str], matchers: str = "") -> str:
    """An instant vector selector of series named any of `names` (RE2 takes Python's escapes)."""
    pattern = "|".join(re.escape(n) for n in names)
    return "{__name__=~" + string(pattern) + ("," + matchers if matchers else "") + "}"


def build_selectors(table: MetricTable) -> dict[str, str]:
    """The selectors of the three groups; a pull adds the range (`[...ms]`)."""
    return {
        "metrics": selector(mapped_names(table)),
        "service_graph": selector(SERVICE_GRAPH),
        "span_metrics": selector(SPAN_METRICS, ENTRY_SPANS),
    }
