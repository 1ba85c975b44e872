"""The hand-written topologies: an LLM-serving stack inside ordinary microservices, and an
Online-Boutique-sized shop. Self times are medians in seconds."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from simulation.topology import Call, LlmCluster, Operation, Role, Topology, db

OPTIONAL_SERVICES = ("moderation", "embedding-service", "guardrails", "reranker")


@dataclass(frozen=True, slots=True)
class LlmLayout:
    """How the LLM stack is deployed: tensor-parallel degree, engine replicas (each its own
    communicator on its own host) and which optional services exist."""

    tp: int = 4
    replicas: int = 1
    optional: frozenset[str] = frozenset({"moderation", "embedding-service"})

    def __post_init__(self) -> None:
        if self.tp < 2 or self.replicas < 1 or not self.optional <= set(OPTIONAL_SERVICES):
            raise ValueError(f"bad LLM layout {self}")

    @property
    def label(self) -> str:
        return f"tp{self.tp}x{self.replicas}"


def engines(layout: LlmLayout) -> tuple[LlmCluster, ...]:
    """Replica 0 is `vllm-engine` with `vllm-worker-{k}` on `gpu-node-1`; replica r > 0 is
    `vllm-engine-{letter}` with `vllm-worker-{letter}-{k}` on `gpu-node-{r + 1}` (b, c, ...). A
    rank's GPU sits on the socket of its half of the board."""
    out = []
    for r in range(layout.replicas):
        suffix = "" if r == 0 else f"-{chr(ord('a') + r)}"
        workers = tuple(f"vllm-worker{suffix}-{k}" for k in range(layout.tp))
        numa = tuple(int(k >= layout.tp // 2) for k in range(layout.tp))
        host = f"gpu-node-{r + 1}"
        comm = hashlib.blake2b(f"{host}/{layout.tp}".encode(), digest_size=8).hexdigest()
        out.append(LlmCluster(f"vllm-engine{suffix}", workers, host, numa, comm))
    return tuple(out)


def llm(layout: LlmLayout | None = None) -> Topology:
    """web-frontend / api-gateway → auth, [moderation], [guardrails], router → rag-retriever →
    [embedding-service], qdrant, [reranker]; redis caches; router → one engine replica's
    `llm_request` → its tensor-parallel `vllm-worker-*` ranks; billing, user-service."""
    layout = layout or LlmLayout()
    has = layout.optional
    replicas = engines(layout)
    chat = "POST /v1/chat/completions"
    share = 0.92 / len(replicas)
    gateway_calls = [Call("auth-service", "Authenticate")]
    gateway_calls += [Call("moderation", "Check", 0.6)] if "moderation" in has else []
    gateway_calls += [Call("guardrails", "Validate", 0.9)] if "guardrails" in has else []
    gateway_calls += [Call("router", "Route"), Call("billing", "RecordUsage", 0.95)]
    embed = (Call("embedding-service", "Embed"),) if "embedding-service" in has else ()
    rerank = (Call("reranker", "Rerank", 0.8),) if "reranker" in has else ()
    retrieve_calls = (*embed, Call("rag-retriever", "search"), *rerank)
    optional_ops = {
        "moderation": Operation("moderation", "Check", 0.012, sigma=1.1, error_rate=0.01),
        "guardrails": Operation("guardrails", "Validate", 0.006, sigma=0.8, error_rate=0.005),
        "embedding-service": Operation("embedding-service", "Embed", 0.012, sigma=0.35),
        "reranker": Operation("reranker", "Rerank", 0.02, sigma=0.5),
    }
    ops = (
        Operation("web-frontend", "POST /chat", 0.004, calls=(Call("api-gateway", chat),)),
        Operation("web-frontend", "GET /history", 0.003, calls=(Call("api-gateway", "GET /v1/history"),)),
        Operation("web-frontend", "GET /", 0.002, calls=(Call("user-service", "GetProfile", 0.6),)),
        Operation("api-gateway", chat, 0.002, calls=tuple(gateway_calls)),
        Operation(
            "api-gateway",
            "GET /v1/history",
            0.0015,
            calls=(Call("auth-service", "Authenticate"), Call("user-service", "GetHistory")),
        ),
        Operation("api-gateway", "GET /v1/models", 0.001),
        Operation(
            "auth-service",
            "Authenticate",
            0.0015,
            calls=(Call("auth-service", "GET session"), Call("user-service", "GetProfile", 0.3)),
        ),
        db("auth-service", "GET session", "redis", 0.0004),
        Operation("user-service", "GetProfile", 0.002, calls=(Call("user-service", "SELECT users"),)),
        Operation("user-service", "GetHistory", 0.003, calls=(Call("user-service", "SELECT messages", 1.0, 3),)),
        db("user-service", "SELECT users", "postgresql", 0.0015),
        db("user-service", "SELECT messages", "postgresql", 0.004, 0.7),
        *(optional_ops[name] for name in OPTIONAL_SERVICES if name in has),
        Operation(
            "router",
            "Route",
            0.0015,
            calls=(
                Call("router", "GET prompt-cache"),
                Call("rag-retriever", "Retrieve", 0.7),
                *(Call(c.engine, "llm_request", share, group=1) for c in replicas),
            ),
        ),
        db("router", "GET prompt-cache", "redis", 0.0005),
        Operation("rag-retriever", "Retrieve", 0.003 if "embedding-service" in has else 0.012, calls=retrieve_calls),
        db("rag-retriever", "search", "qdrant", 0.008, 0.6),
        *(Operation(c.engine, "llm_request", 0.0, role=Role.LLM_REQUEST) for c in replicas),
        Operation("billing", "RecordUsage", 0.003, error_rate=0.04, calls=(Call("billing", "INSERT usage"),)),
        db("billing", "INSERT usage", "postgresql", 0.002),
    )
    return Topology(
        name="llm",
        operations=ops,
        entries=(
            ("web-frontend", "POST /chat", 0.45),
            ("web-frontend", "GET /history", 0.1),
            ("web-frontend", "GET /", 0.15),
            ("api-gateway", chat, 0.25),
            ("api-gateway", "GET /v1/models", 0.05),
        ),
        user_facing=("web-frontend", "api-gateway"),
        noisy=tuple(s for s in ("moderation", "guardrails", "billing") if s == "billing" or s in has),
        instances=(("router", 2), ("rag-retriever", 2), ("auth-service", 2)),
        default_rate=2.0,
        engines=replicas,
        extra_services=tuple(w for c in replicas for w in c.workers),
    )


def boutique() -> Topology:
    """Online Boutique's 11 services and their calls (redis-cart is a virtual node)."""
    pc, cur, cart, rec = "productcatalogservice", "currencyservice", "cartservice", "recommendationservice"
    ops = (
        Operation(
            "frontend",
            "GET /",
            0.003,
            calls=(
                Call(cur, "GetSupportedCurrencies"),
                Call(pc, "ListProducts"),
                Call(cart, "GetCart"),
                Call(cur, "Convert", 1.0, 6),
                Call("adservice", "GetAds", 0.8),
            ),
        ),
        Operation(
            "frontend",
            "GET /product/{id}",
            0.003,
            calls=(
                Call(pc, "GetProduct"),
                Call(cur, "GetSupportedCurrencies"),
                Call(cart, "GetCart"),
                Call(cur, "Convert"),
                Call(rec, "ListRecommendations"),
                Call("adservice", "GetAds"),
            ),
        ),
        Operation("frontend", "POST /cart", 0.002, calls=(Call(pc, "GetProduct"), Call(cart, "AddItem"))),
        Operation(
            "frontend",
            "GET /cart",
            0.003,
            calls=(
                Call(cur, "GetSupportedCurrencies"),
                Call(cart, "GetCart"),
                Call(rec, "ListRecommendations"),
                Call("shippingservice", "GetQuote"),
                Call(pc, "GetProduct", 1.0, 3),
                Call(cur, "Convert", 1.0, 3),
            ),
        ),
        Operation(
            "frontend",
            "POST /cart/checkout",
            0.004,
            calls=(
                Call("checkoutservice", "PlaceOrder"),
                Call(rec, "ListRecommendations"),
                Call(cur, "GetSupportedCurrencies"),
            ),
        ),
        Operation("frontend", "POST /setCurrency", 0.001),
        Operation("frontend", "POST /bot", 0.004, calls=(Call("shoppingassistantservice", "Ask"),)),
        Operation(
            "checkoutservice",
            "PlaceOrder",
            0.004,
            calls=(
                Call(cart, "GetCart"),
                Call(pc, "GetProduct", 1.0, 3),
                Call(cur, "Convert", 1.0, 3),
                Call("shippingservice", "GetQuote"),
                Call("paymentservice", "Charge"),
                Call("shippingservice", "ShipOrder"),
                Call(cart, "EmptyCart"),
                Call("emailservice", "SendOrderConfirmation"),
            ),
        ),
        Operation(cart, "GetCart", 0.001, calls=(Call(cart, "HGET"),)),
        Operation(cart, "AddItem", 0.0012, calls=(Call(cart, "HGET"), Call(cart, "HSET"))),
        Operation(cart, "EmptyCart", 0.001, calls=(Call(cart, "HSET"),)),
        db(cart, "HGET", "redis-cart", 0.0004),
        db(cart, "HSET", "redis-cart", 0.0005),
        Operation(rec, "ListRecommendations", 0.004, sigma=0.9, calls=(Call(pc, "ListProducts"),)),
        Operation(pc, "ListProducts", 0.0015),
        Operation(pc, "GetProduct", 0.0008),
        Operation(cur, "GetSupportedCurrencies", 0.0006),
        Operation(cur, "Convert", 0.0005),
        Operation("paymentservice", "Charge", 0.003),
        Operation("shippingservice", "GetQuote", 0.001),
        Operation("shippingservice", "ShipOrder", 0.0015),
        Operation("emailservice", "SendOrderConfirmation", 0.006),
        Operation("adservice", "GetAds", 0.002, sigma=1.0, error_rate=0.03),
        Operation(
            "shoppingassistantservice",
            "Ask",
            0.4,
            sigma=0.9,
            error_rate=0.02,
            calls=(Call(pc, "ListProducts"),),
        ),
    )
    return Topology(
        name="boutique",
        operations=ops,
        entries=(
            ("frontend", "GET /", 0.3),
            ("frontend", "GET /product/{id}", 0.3),
            ("frontend", "POST /cart", 0.12),
            ("frontend", "GET /cart", 0.12),
            ("frontend", "POST /cart/checkout", 0.08),
            ("frontend", "POST /setCurrency", 0.05),
            ("frontend", "POST /bot", 0.03),
        ),
        user_facing=("frontend",),
        noisy=("adservice", "recommendationservice", "shoppingassistantservice"),
        instances=((cart, 3), (pc, 3), (cur, 2), ("checkoutservice", 2), ("frontend", 2), (rec, 2)),
        default_rate=3.0,
    )
