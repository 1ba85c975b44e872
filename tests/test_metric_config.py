"""The config file's [metrics] table: entries extend and override the built-in metric table, bad
ones stop startup naming what is wrong, and the service maps what they name."""

from __future__ import annotations

from pathlib import Path

import pytest

from rca.app.compose import Service
from rca.app.config import ConfigError, HostPort, load_settings
from rca.telemetry.faults import Fault
from rca.telemetry.metric_rows import MetricRows
from rca.telemetry.metrics import MetricKind

T0 = 1_767_571_200 * 1_000_000_000
CUSTOM = """
http = "127.0.0.1:0"

[[metrics.map]]
name = "my_gpu_hbm_busy_ratio"
signal = "hbm_busy"
fault = "gpu_memory_bandwidth"
direction = "up"
healthy = 0.7
faulty = 0.9

[[metrics.map]]
name = "vllm:num_requests_waiting"
signal = "waiting"
fault = "scheduler_priority_inversion"
"""


def test_entries_extend_and_override_the_built_in_table(tmp_path: Path) -> None:
    path = tmp_path / "rca.toml"
    path.write_text(CUSTOM)
    settings = load_settings({"config": str(path)}, {})
    assert [r.name for r in settings.metric_rules] == ["my_gpu_hbm_busy_ratio", "vllm:num_requests_waiting"]
    assert settings.http == HostPort("127.0.0.1", 0)
    loopback = str(HostPort("127.0.0.1", 0))
    flags = {"config": str(path), "otlp_grpc": loopback, "otlp_http": loopback, "db": f"sqlite:///{tmp_path}/r.db"}
    service = Service(load_settings(flags, {}))
    try:
        table = service.graph.measures.table
        custom = table.rule("my_gpu_hbm_busy_ratio")
        assert custom is not None and custom.fault is Fault.GPU_MEMORY_BANDWIDTH and custom.healthy == 0.7
        waiting = table.rule("vllm:num_requests_waiting")
        assert waiting is not None and waiting.fault is Fault.SCHEDULER_PRIORITY_INVERSION
        assert table.rule("DCGM_FI_PROF_DRAM_ACTIVE") is not None  # the rest of the table stays
        rows = MetricRows()
        labels = {"gpu": "0", "Hostname": "h", "exported_pod": "vllm-engine-7d9f8b6c5d-x2x4z"}
        rows.add("my_gpu_hbm_busy_ratio", MetricKind.GAUGE, {}, labels, T0, 0, 0.5)
        service.writer.submit(rows.build().batch)
        assert service.writer.read(lambda g: (g.counts().metric_points, dict(g.measures.unknown))) == (1, {})
    finally:
        service.writer.close()
        service.store.close()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[metrics]\nmapping = []\n", "unknown key(s) mapping in [metrics]"),
        ("metrics = 3\n", "'metrics' in"),
        ('[[metrics.map]]\nname = "x"\nsignal = "s"\nfault = "slowness"\n', "fault 'slowness'"),
        ('[[metrics.map]]\nname = "x"\nsignal = "s"\nfault = "errors"\ndirection = "sideways"\n', "direction"),
        ('[[metrics.map]]\nsignal = "s"\nfault = "errors"\n', "name must be"),
        ('[[metrics.map]]\nname = "x"\nsignal = "s"\nfault = "errors"\nshare_of = "X"\n', "share_of must name"),
        ('[[metrics.map]]\nname = "x"\nsignal = "s"\nfault = "errors"\nshare_of = 3\n', "share_of must name"),
        ('[[metrics.map]]\nname = "x"\nsignal = "s"\nfault = "errors"\npeers = "all"\n', "peers 'all' is not"),
    ],
)
def test_a_bad_metrics_table_stops_startup_naming_it(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "rca.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as failure:
        load_settings({"config": str(path)}, {})
    assert says in str(failure.value) and str(path) in str(failure.value)
