"""The hand-written topologies: an LLM-serving stack inside ordinary microservices, and an
Online-Boutique-sized shop. Self times are medians in seconds."""

from __future__ import annotations

from rca.simulation.topology import Call, LlmCluster, Operation, Role, Topology, db

TP_RANKS = 4


def llm() -> Topology:
    """web-frontend / api-gateway → auth, moderation, router → rag-retriever → qdrant, redis
    cache, vllm-engine `llm_request` → tensor-parallel `vllm-worker-{k}`; billing, user-service."""
    workers = tuple(f"vllm-worker-{k}" for k in range(TP_RANKS))
    chat = "POST /v1/chat/completions"
    ops = (
        Operation("web-frontend", "POST /chat", 0.004, calls=(Call("api-gateway", chat),)),
        Operation("web-frontend", "GET /history", 0.003, calls=(Call("api-gateway", "GET /v1/history"),)),
        Operation("web-frontend", "GET /", 0.002, calls=(Call("user-service", "GetProfile", 0.6),)),
        Operation(
            "api-gateway",
            chat,
            0.002,
            calls=(
                Call("auth-service", "Authenticate"),
                Call("moderation", "Check", 0.6),
                Call("router", "Route"),
                Call("billing", "RecordUsage", 0.95),
            ),
        ),
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
        Operation("moderation", "Check", 0.012, sigma=1.1, error_rate=0.01),
        Operation(
            "router",
            "Route",
            0.0015,
            calls=(
                Call("router", "GET prompt-cache"),
                Call("rag-retriever", "Retrieve", 0.7),
                Call("vllm-engine", "llm_request", 0.92),
            ),
        ),
        db("router", "GET prompt-cache", "redis", 0.0005),
        Operation(
            "rag-retriever",
            "Retrieve",
            0.003,
            calls=(Call("embedding-service", "Embed"), Call("rag-retriever", "search")),
        ),
        db("rag-retriever", "search", "qdrant", 0.008, 0.6),
        Operation("embedding-service", "Embed", 0.012, sigma=0.35),
        Operation("vllm-engine", "llm_request", 0.0, role=Role.LLM_REQUEST),
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
        noisy=("moderation", "billing"),
        instances=(("router", 2), ("rag-retriever", 2), ("auth-service", 2)),
        default_rate=2.0,
        llm=LlmCluster("vllm-engine", workers, "gpu-node-1", gpu_numa=(0, 0, 1, 1)),
        extra_services=workers,
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
