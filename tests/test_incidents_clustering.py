"""Clustering alerts into incidents: interleaved and overlapping faults, stable incremental ids."""

from __future__ import annotations

from collections.abc import Sequence

from rca.graph.service_graph import ServiceGraph
from rca.incidents.clustering import AlertClusterer
from rca.incidents.model import Incident, IncidentStatus
from rca.incidents.topology import UNCONNECTED, CallTopology, topology_between
from rca.telemetry.alerts import Alert, AlertStatus
from tests.spanfactory import T0, batch
from tests.test_incidents_service import alert, shop_graph

S = 1_000_000_000


def topology(graph: ServiceGraph | None = None) -> CallTopology:
    return topology_between(graph or shop_graph(), T0 - 600 * S, T0 + 600 * S)


def incidents_of(
    clusterer: AlertClusterer, batches: Sequence[Sequence[Alert]], topo: CallTopology
) -> dict[str, list[str]]:
    """Feeds alert batches one by one (as webhooks arrive); incident id -> service@second."""
    placed: list[tuple[Alert, str]] = []
    for new in batches:
        started: dict[str, int] = {}
        for a, i in placed:
            started[i] = min(started.get(i, a.starts_at_ns), a.starts_at_ns)
        incidents = [(a, Incident(i, IncidentStatus.OPEN, started[i], None, 1, ())) for a, i in placed]
        placed += zip(new, clusterer.assign(new, incidents, topo), strict=True)
    out: dict[str, list[str]] = {}
    for a, i in placed:
        out.setdefault(i, []).append(f"{a.service}@{(a.starts_at_ns - T0) // S}")
    return out


def test_topology_hops_and_roots() -> None:
    topo = topology()
    assert topo.roots == ("gateway", "search")
    assert topo.hops(["gateway"], ["payment"]) == 2
    assert topo.hops(["payment"], ["index"]) == UNCONNECTED
    assert topo.nodes_for("checkout") == ("checkout",)


def test_alerts_are_placed_only_on_nodes_active_in_the_range() -> None:
    """A name the graph saw 20 minutes earlier but not in the range (a retired service, or another
    system replayed before) is placed like an untraced name: on the nearest active service."""
    graph = shop_graph()
    graph.add(batch(("frontend", "GET /", 9, 0, -1_200_000, 40), ("gateway-old", "GET /", 10, 9, -1_199_990, 5)))
    topo = topology(graph)
    assert "frontend" not in topo.known and "frontend" not in topo.traced
    assert topo.nodes_for("frontend") == ("gateway", "search")  # no near name: the active roots
    assert topo.nodes_for("gateway-old") == ("gateway",)  # nearest active name
    assert topology_between(graph, T0 - 1_300 * S, T0 - 1_100 * S).nodes_for("frontend") == ("frontend",)


def test_overlapping_faults_in_unconnected_parts_stay_apart() -> None:
    """Two faults at the same moment, one in the shop, one in search: alerts interleave."""
    shop = [alert("checkout", 0, name="HighErrorRate"), alert("gateway", 30, name="HighLatency")]
    search = [alert("index", 5, name="HighLatency"), alert("search", 25, name="HighErrorRate")]
    one_webhook = incidents_of(AlertClusterer(), [[shop[0], search[0], search[1], shop[1]]], topology())
    assert sorted(map(sorted, one_webhook.values())) == [["checkout@0", "gateway@30"], ["index@5", "search@25"]]
    arriving = incidents_of(AlertClusterer(), [[shop[0]], [search[0]], [search[1]], [shop[1]]], topology())
    assert sorted(map(sorted, arriving.values())) == sorted(map(sorted, one_webhook.values()))


def test_the_same_service_failing_again_much_later_is_a_new_incident() -> None:
    faults = [alert("checkout", 0), alert("gateway", 40), alert("checkout", 7200), alert("payment", 7230)]
    got = incidents_of(AlertClusterer(), [faults[:1], faults[1:3], faults[3:]], topology())
    assert sorted(map(sorted, got.values())) == [["checkout@0", "gateway@40"], ["checkout@7200", "payment@7230"]]


def test_incident_keeps_the_id_of_its_oldest_incident_as_alerts_arrive() -> None:
    topo = topology()
    clusterer = AlertClusterer()
    first = alert("payment", 0)
    (pid,) = clusterer.assign([first], [], topo)
    placed = [(first, Incident(pid, IncidentStatus.OPEN, first.starts_at_ns, None, 1, ()))]
    later = [alert("gateway", 50), alert("checkout", 20)]
    assert clusterer.assign(later, placed, topo) == [pid, pid]
    other = alert("search", 10)
    (sid,) = clusterer.assign([other], placed, topo)
    assert sid != pid
    both = [*placed, (other, Incident(sid, IncidentStatus.OPEN, other.starts_at_ns, None, 1, ()))]
    # an alert near both (no traffic of its own: graph distance unknown) joins the older incident
    bridge = alert("mystery", 5, name="HighLatency")
    assert clusterer.assign([bridge], both, topo) == [pid]


def test_founding_ids_do_not_depend_on_arrival_order() -> None:
    a, b = alert("checkout", 0), alert("gateway", 10)
    topo = topology()
    assert AlertClusterer().assign([a, b], [], topo) == AlertClusterer().assign([b, a], [], topo)[::-1]


def test_labels_pull_apart_alerts_without_graph_evidence() -> None:
    """No traces at all: time and labels decide; another cluster's alerts stay apart."""
    empty = topology(ServiceGraph())
    firing = AlertStatus.FIRING
    east = Alert("f1", firing, {"alertname": "Down", "cluster": "east", "service": "a"}, {}, T0, None, "", "a")
    west = Alert("f2", firing, {"alertname": "Slow", "cluster": "west", "service": "b"}, {}, T0, None, "", "b")
    same = Alert("f3", firing, {"alertname": "Down", "cluster": "east", "service": "c"}, {}, T0, None, "", "c")
    d = AlertClusterer(unknown=0.8).distances([east, west, same], empty)
    assert d[0, 2] < 1.0 < d[0, 1]
