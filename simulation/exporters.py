"""The real-deployment style's Kubernetes deployment and its exporters, as a Collector sees them.

Every workload runs as pods named the way Kubernetes names a Deployment's pods
(`{name}-{pod-template-hash}-{5 chars}`, both from Kubernetes' vowel-free alphabet), so that a
pod label strips back to the service the spans name; the DaemonSets' pods are `{name}-{5 chars}`.
Engine replica r's pod runs on its own GPU host (`gpu-node-{r + 1}`, the topology's), the other
pods on 2-5 CPU nodes. One scrape interval is drawn per case (5-30 s); each target is scraped at
its own phase. A target's resource is what the Collector's `prometheus` receiver makes of its
scrape (`service.name` the job, `service.instance.id` the instance, `server.address`/`port`,
`url.scheme`), plus `host.name`, the node of the DaemonSet agent that scraped it (its
`resourcedetection` processor); `job` and `instance` are not point labels. The targets:

- dcgm-exporter per GPU host (`gpu-operator` namespace), labels `gpu`, `UUID`, `device`,
  `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, its own `pod`/`namespace`, and the engine's
  as `exported_pod`/`exported_namespace`/`exported_container` (Prometheus' `honor_labels: false`);
- each vLLM engine pod (job = its app label, the service name), labels `model_name`, `engine`, `pod`;
- node_exporter per node (static target `{node}:9100` on the host network);
- the kubelet's cAdvisor endpoint per node, labels `pod`, `container`, `namespace` (its `id`,
  `name` and `image` labels dropped by the scrape's metric relabelling, as is common).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulation.topology import CompiledTopology

I64 = npt.NDArray[np.int64]
K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes draws name suffixes from
INTERVALS_S = (5.0, 10.0, 15.0, 20.0, 30.0)
GPU_MODELS = (
    ("NVIDIA H100 80GB HBM3", 81559.0),
    ("NVIDIA H200", 143771.0),
    ("NVIDIA A100-SXM4-80GB", 81920.0),
    ("NVIDIA A100-SXM4-40GB", 40960.0),
)
SERVED_MODELS = (
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
)
NAMESPACES = ("default", "chat", "prod", "serving")
PROFILING_SHARE = 0.7  # of deployments whose DCGM exporter has the profiling fields
PRIORITY_HEADER_SHARE = 0.6  # of deployments whose services capture the `x-priority` request header
DRIVERS = ("535.183.01", "550.90.07", "560.35.03")
GPU_NAMESPACE = "gpu-operator"
Labels = dict[str, str]


def _suffix(rng: np.random.Generator, n: int) -> str:
    return "".join(K8S_ALPHABET[i] for i in rng.integers(0, len(K8S_ALPHABET), n).tolist())


def pod_name(workload: str, rng: np.random.Generator, daemon: bool = False) -> str:
    """A Deployment's pod name (a DaemonSet's with `daemon`)."""
    return f"{workload}-{_suffix(rng, 5)}" if daemon else f"{workload}-{_suffix(rng, 10)}-{_suffix(rng, 5)}"


@dataclass(frozen=True, slots=True)
class Target:
    """One scrape target: its resource and its scrape times in the case."""

    resource: Labels
    times_ns: I64


@dataclass(frozen=True, slots=True)
class Deployment:
    """The case's pods, nodes, GPUs and scrape schedule."""

    start_ns: int
    stop_ns: int
    interval_s: float
    namespace: str
    pods: dict[str, tuple[str, ...]]  # workload (service, datastore, engine) → its pods
    node_of: dict[str, str]  # pod → node
    ip: dict[str, str]  # pod → pod IP
    gpu_hosts: tuple[str, ...]  # one per engine replica, in the topology's order
    cpu_nodes: tuple[str, ...]
    dcgm_pods: dict[str, str]  # GPU host → its exporter pod
    gpu_model: str
    gpu_mib: float
    driver: str
    uuids: dict[str, tuple[str, ...]]  # GPU host → each GPU's UUID
    served_model: str
    phase_s: dict[str, float]  # target key → scrape phase
    agent_start_ns: int  # when the Collector first scraped: the start time of cumulative series

    engines: tuple[str, ...]  # the engine replicas' workloads
    profiling: bool  # the DCGM exporter has its profiling fields (DCGM_FI_PROF_*): not every GPU or setup does
    priority_header: bool  # the engine's callers capture the request's `x-priority` header on their spans

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.gpu_hosts + self.cpu_nodes

    @staticmethod
    def draw(ct: CompiledTopology, start_ns: int, stop_ns: int, rng: np.random.Generator) -> Deployment:
        t = ct.topology
        workers = {w for e in t.engines for w in e.workers}
        engines = [e.engine for e in t.engines]
        services = [s for i, s in enumerate(ct.services) if s not in workers and s not in engines]
        stores = sorted({p for p in ct.op_peer if p is not None})
        pods = {s: tuple(pod_name(s, rng) for _ in range(int(ct.instances[ct.service_index[s]]))) for s in services}
        pods |= {s: (pod_name(s, rng),) for s in stores}
        pods |= {e: (pod_name(e, rng),) for e in engines}
        hosts = tuple(e.host for e in t.engines)
        cpu_nodes = tuple(f"cpu-node-{k + 1}" for k in range(int(rng.integers(2, 6))))
        node_of = {p: cpu_nodes[int(rng.integers(len(cpu_nodes)))] for w in (*services, *stores) for p in pods[w]}
        node_of |= {pods[e.engine][0]: e.host for e in t.engines}
        every_pod = [p for group in pods.values() for p in group]
        ip = {
            p: f"10.{int(rng.integers(0, 255))}.{int(rng.integers(0, 255))}.{int(rng.integers(2, 254))}"
            for p in every_pod
        }
        model, mib = GPU_MODELS[int(rng.integers(len(GPU_MODELS)))]
        tp = len(t.engines[0].workers) if t.engines else 0
        uuids = {h: tuple(_uuid(rng) for _ in range(tp)) for h in hosts}
        keys = [*(f"dcgm/{h}" for h in hosts), *(f"vllm/{e}" for e in engines)]
        keys += [f"node/{n}" for n in (*hosts, *cpu_nodes)] + [f"kubelet/{n}" for n in (*hosts, *cpu_nodes)]
        interval = INTERVALS_S[int(rng.integers(len(INTERVALS_S)))]
        return Deployment(
            start_ns=start_ns,
            stop_ns=stop_ns,
            interval_s=interval,
            namespace=NAMESPACES[int(rng.integers(len(NAMESPACES)))],
            pods=pods,
            node_of=node_of,
            ip=ip,
            gpu_hosts=hosts,
            cpu_nodes=cpu_nodes,
            dcgm_pods={h: pod_name("nvidia-dcgm-exporter", rng, daemon=True) for h in hosts},
            gpu_model=model,
            gpu_mib=mib,
            driver=DRIVERS[int(rng.integers(len(DRIVERS)))],
            uuids=uuids,
            served_model=SERVED_MODELS[int(rng.integers(len(SERVED_MODELS)))],
            phase_s={k: float(rng.uniform(0, interval)) for k in keys},
            agent_start_ns=start_ns - int(rng.uniform(3_600, 10 * 86_400)) * 1_000_000_000,
            engines=tuple(engines),
            profiling=bool(rng.random() < PROFILING_SHARE),
            priority_header=bool(rng.random() < PRIORITY_HEADER_SHARE),
        )

    def times(self, key: str) -> I64:
        """The scrape times of target `key` in [start, stop), whole milliseconds."""
        step = int(self.interval_s * 1e9)
        first = self.start_ns + int(self.phase_s[key] * 1e9) // 1_000_000 * 1_000_000
        return np.arange(first, self.stop_ns, step, dtype=np.int64)

    def _target(self, key: str, job: str, instance: str, node: str) -> Target:
        address, _, port = instance.rpartition(":")
        resource = {
            "service.name": job,
            "service.instance.id": instance,
            "server.address": address,
            "server.port": port,
            "url.scheme": "http",
            "host.name": node,
        }
        return Target(resource, self.times(key))

    def dcgm(self, host: str) -> Target:
        pod = self.dcgm_pods[host]
        return self._target(f"dcgm/{host}", "dcgm-exporter", f"{self.ip.get(pod, host)}:9400", host)

    def dcgm_labels(self, host: str, gpu: int, engine: str) -> Labels:
        return {
            "gpu": str(gpu),
            "UUID": self.uuids[host][gpu],
            "device": f"nvidia{gpu}",
            "modelName": self.gpu_model,
            "Hostname": host,
            "DCGM_FI_DRIVER_VERSION": self.driver,
            "pod": self.dcgm_pods[host],
            "namespace": GPU_NAMESPACE,
            "exported_pod": self.pods[engine][0],
            "exported_namespace": self.namespace,
            "exported_container": "vllm",
        }

    def vllm(self, engine: str) -> Target:
        pod = self.pods[engine][0]
        return self._target(f"vllm/{engine}", engine, f"{self.ip[pod]}:8000", self.node_of[pod])

    def vllm_labels(self, engine: str) -> Labels:
        return {
            "model_name": self.served_model,
            "engine": "0",
            "pod": self.pods[engine][0],
            "namespace": self.namespace,
        }

    def node_exporter(self, node: str) -> Target:
        return self._target(f"node/{node}", "node-exporter", f"{node}:9100", node)

    def kubelet(self, node: str) -> Target:
        return self._target(f"kubelet/{node}", "kubelet", f"{node}:10250", node)

    def cadvisor_labels(self, pod: str, container: str) -> Labels:
        return {"pod": pod, "container": container, "namespace": self.namespace}


def _uuid(rng: np.random.Generator) -> str:
    h = f"{int(rng.integers(0, 2**62)):016x}{int(rng.integers(0, 2**62)):016x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
