"""Generated service meshes (200 and 1000 services): layered call DAGs with databases at the
bottom, a fixed structure per size (the case seed picks the fault, not the mesh)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulation.topology import Call, Operation, Topology, db

_DOMAINS = (
    "account", "billing", "catalog", "checkout", "fraud", "geo", "identity", "inventory", "ledger", "media",
    "notify", "order", "payment", "pricing", "profile", "promo", "rating", "search", "session", "shipping",
    "stock", "tax", "ticket", "user", "wallet", "warehouse", "review", "loyalty", "invoice", "audit",
)  # fmt: skip
_ROLES = ("api", "svc", "worker", "store", "resolver", "adapter", "indexer", "scheduler")
_VERBS = ("Get", "List", "Create", "Update", "Validate", "Resolve", "Check", "Sync")
_DATABASES = ("postgresql", "mysql", "redis", "mongodb", "cassandra")
_EXPECTED_SPANS_CAP = 24.0  # expected spans below one operation, calls thinned above it
_MESH_SEED = 20_240_601


def _names(count: int) -> list[str]:
    names = [f"{d}-{r}" for r in _ROLES for d in _DOMAINS]
    if count <= len(names):
        return names[:count]
    return [f"{names[i % len(names)]}-{i // len(names)}" if i >= len(names) else names[i] for i in range(count)]


def mesh(services: int, variant: int = 0) -> Topology:
    """`services` services (two user-facing gateways included) in layers of growing width; each
    `variant` wires them differently."""
    rng = np.random.default_rng([_MESH_SEED + services, variant] if variant else _MESH_SEED + services)
    layers = 6 if services <= 300 else 8
    inner = _names(services - 2)
    weights = np.minimum(np.arange(1, layers + 1), 4).astype(float)
    sizes = np.maximum(1, np.round(weights / weights.sum() * len(inner)).astype(int))
    sizes[-1] += len(inner) - sizes.sum()
    layer_of = np.repeat(np.arange(1, layers + 1), sizes)
    ops_of: dict[str, list[str]] = {}
    for name in inner:
        noun = name.split("-")[0].capitalize()
        verbs = rng.choice(_VERBS, size=int(rng.integers(1, 4)), replace=False)
        ops_of[name] = [f"{v}{noun}" for v in verbs]
    layer = dict(zip(inner, layer_of.tolist(), strict=True))
    by_layer = [[s for s in inner if layer[s] == k] for k in range(layers + 1)]
    calls: dict[tuple[str, str], list[Call]] = {(s, o): [] for s in inner for o in ops_of[s]}
    # every service's first operation gets a caller's first operation one layer up (so all are
    # reachable); then random extra calls downwards
    for k in range(2, layers + 1):
        for callee in by_layer[k]:
            caller = by_layer[k - 1][int(rng.integers(len(by_layer[k - 1])))]
            calls[(caller, ops_of[caller][0])].append(Call(callee, ops_of[callee][0], float(rng.uniform(0.4, 1.0))))
    for (service, _op), out in calls.items():
        if layer[service] == layers:
            continue
        for _ in range(int(rng.choice([0, 0, 1, 1, 2]))):
            here = layer[service]
            target_layer = here + 1 if rng.random() < 0.75 else int(rng.integers(here + 1, layers + 1))
            callee = by_layer[target_layer][int(rng.integers(len(by_layer[target_layer])))]
            callee_op = ops_of[callee][int(rng.integers(len(ops_of[callee])))]
            if all(c.operation != callee_op or c.service != callee for c in out):
                out.append(Call(callee, callee_op, float(rng.uniform(0.2, 0.9)), int(rng.choice([1, 1, 1, 3]))))
    operations: list[Operation] = []
    noisy = tuple(str(s) for s in rng.choice(inner, size=max(2, services // 25), replace=False))
    for service in inner:
        store = None
        if layer[service] >= layers - 2 and rng.random() < 0.5:
            system = str(rng.choice(_DATABASES))
            store = db(service, f"{system.upper()} {service.split('-')[0]}", f"{system}/{service.split('-')[0]}", 0.002)
            operations.append(store)
        for op in ops_of[service]:
            out = calls[(service, op)]
            if store is not None:
                out.append(Call(service, store.name, 0.8))
            median = float(np.clip(rng.lognormal(np.log(0.002), 0.7), 0.0003, 0.03))
            sigma, errors = (1.1, 0.03) if service in noisy else (float(rng.uniform(0.3, 0.6)), 0.002)
            operations.append(Operation(service, op, median, sigma, errors, tuple(out)))
    entries, gateway_ops = _gateways(rng, by_layer[1], ops_of)
    operations = gateway_ops + operations
    return _thinned(
        Topology(
            name=f"mesh{services}",
            operations=tuple(operations),
            entries=entries,
            user_facing=("frontend", "api-gateway"),
            noisy=noisy,
            instances=tuple((str(s), int(rng.integers(2, 4))) for s in rng.choice(inner, size=services // 10)),
            default_rate=3.0,
        )
    )


def _gateways(
    rng: np.random.Generator, first: list[str], ops_of: dict[str, list[str]]
) -> tuple[tuple[tuple[str, str, float], ...], list[Operation]]:
    """Entry operations on `frontend` and `api-gateway` that together reach every first-layer service."""
    order = list(rng.permutation(first))
    endpoints = max(4, len(first) // 3)
    entries: list[tuple[str, str, float]] = []
    ops: list[Operation] = []
    for i in range(endpoints * 2):
        gateway = "frontend" if i % 2 == 0 else "api-gateway"
        covered = [(str(s), ops_of[s][0]) for s in order[i :: endpoints * 2]]
        extra = [(str(s), ops_of[s][int(rng.integers(len(ops_of[s])))]) for s in rng.choice(first, size=2)]
        unique = list(dict.fromkeys(covered + extra))
        out = tuple(Call(s, op, 1.0) for s, op in unique)
        name = f"{'GET' if i % 3 else 'POST'} /{unique[0][0].split('-')[0]}/{i}"
        ops.append(Operation(gateway, name, 0.002, 0.4, 0.002, out))
        entries.append((gateway, name, float(rng.uniform(0.5, 2.0))))
    return tuple(entries), ops


def _thinned(topology: Topology) -> Topology:
    """Lowers call probabilities bottom-up so no operation expects more than the cap of spans below it."""
    by_key = {(o.service, o.name): o for o in topology.operations}
    size: dict[tuple[str, str], float] = {}

    def visit(key: tuple[str, str]) -> float:
        if key in size:
            return size[key]
        op = by_key[key]
        below = [(c, visit((c.service, c.operation)) * (1 + c.max_count) / 2 + 1) for c in op.calls]
        expected = sum(c.probability * s for c, s in below)
        scale = min(1.0, _EXPECTED_SPANS_CAP / expected) if expected else 1.0
        if scale < 1.0:
            calls = tuple(replace(c, probability=c.probability * scale) for c in op.calls)
            by_key[key] = replace(op, calls=calls)
        size[key] = 1.0 + expected * scale
        return size[key]

    for key in list(by_key):
        visit(key)
    return replace(topology, operations=tuple(by_key[(o.service, o.name)] for o in topology.operations))
