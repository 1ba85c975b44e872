"""`rca fit` on a real SQLite database, `--params` / `RCA_PARAMS` / TOML `params` at startup, and
the parameters' version in `CAUSES.model.name` and `rca_model_info`."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from models.health import load_params, params_version, save_params
from models.params_file import read_params
from models.ranker import MODEL_NAME
from models.refit import label_case
from rca.app.cli import main
from rca.app.config import ConfigError, load_settings
from rca.evidence.nodes import N_COLUMNS
from storage.sql import SqlIncidentStore
from tests.test_feedback import LABEL, open_incident, served

SHIPPED_VERSION = params_version(load_params())


def _served_version(db: Path, params: Path | None) -> tuple[str, str]:
    """The version `rca serve` shows for `params`: in an incident's CAUSES and in /metrics."""
    with served(db, params=params) as (_, client):
        incident = open_incident(client)
        name = client.get(f"/incidents/{incident}/causes").json()["model"]["name"]
        metrics = client.get("/metrics").text
    (info,) = re.findall(r'^rca_model_info\{name="([^"]+)",version="([^"]+)"\} 1\.0$', metrics, re.MULTILINE)
    assert info[0] == MODEL_NAME
    return name, info[1]


def test_the_shipped_version_is_served_and_stable(tmp_path: Path) -> None:
    assert re.fullmatch(r"[0-9a-f]{12}", SHIPPED_VERSION)
    copy = tmp_path / "copy.json"
    save_params(load_params(), copy)
    assert params_version(read_params(copy)) == SHIPPED_VERSION  # written and read back: the same version
    assert _served_version(tmp_path / "rca.db", None) == (f"{MODEL_NAME}@{SHIPPED_VERSION}", SHIPPED_VERSION)


def test_rca_fit_writes_parameters_that_serve_under_their_own_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out = tmp_path / "rca.db", tmp_path / "fitted" / "params.json"
    with served(db) as (_, client):
        incident = open_incident(client)
        assert client.post(f"/incidents/{incident}/feedback", json=LABEL).status_code == 200
    assert main(["fit", "--db", f"sqlite:///{db}", "--out", str(out), "--sim-seeds", ""]) == 0
    summary = json.loads(capsys.readouterr().out)
    version = params_version(read_params(out))
    assert summary["version"] == version != SHIPPED_VERSION
    assert summary["model"] == f"{MODEL_NAME}@{version}" and summary["out"] == str(out)
    assert (summary["cases"], summary["labelled"], summary["labelled_used"], summary["simulated"]) == (1, 1, 1, 0)
    assert 0.0 <= summary["calibration"]["mean_top1_probability"] <= 1.0 + 1e-9
    assert summary["calibration"]["top1_accuracy"] in (0.0, 1.0)
    assert _served_version(tmp_path / "served.db", out) == (f"{MODEL_NAME}@{version}", version)


def test_a_label_without_a_fault_is_fitted_at_its_nodes_likeliest_class(tmp_path: Path) -> None:
    with served(tmp_path / "rca.db") as (service, client):
        incident = open_incident(client)
        client.post(f"/incidents/{incident}/feedback", json={"node": "payment", "fault": None})
        labelled = service.store.label(incident)
        assert labelled is not None
        _, _, node, fault = label_case(labelled, load_params()) or ((), (), "", "")
        assert (node, fault) == ("payment", "latency")  # its self time rose, nothing else did
        client.post(f"/incidents/{incident}/feedback", json={"node": "dns", "fault": "errors"})
        unseen = service.store.label(incident)
        assert unseen is not None and label_case(unseen, load_params()) is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--db", "nonsense://nowhere"], "cannot open nonsense://nowhere"),
        (["--db", "sqlite:///{tmp}/missing.db"], "no database file"),
        (["--db", "sqlite:///{tmp}/empty.db", "--sim-seeds", ""], "no cases"),
        (["--db", "sqlite:///{tmp}/empty.db", "--sim-scenarios", "llm-nope", "--sim-seeds", "1"], "unknown scenario"),
    ],
)
def test_rca_fit_refuses_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    SqlIncidentStore.open(f"sqlite:///{tmp_path}/empty.db").close()
    out = tmp_path / "params.json"
    code = main(["fit", *(a.replace("{tmp}", str(tmp_path)) for a in args), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("rca fit: ") and says in captured.err
    assert not out.exists()


def test_rca_fit_takes_the_database_from_rca_db(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RCA_DB", f"sqlite:///{tmp_path}/from-env.db")
    assert main(["fit", "--out", str(tmp_path / "p.json"), "--sim-seeds", ""]) == 2
    assert "from-env.db" in capsys.readouterr().err


# -- --params at startup ------------------------------------------------------------------------


def _params_file(tmp_path: Path, name: str = "p.json", **changes: object) -> Path:
    raw: dict[str, object] = {**asdict(load_params()), **changes}
    path = tmp_path / name
    path.write_text(json.dumps(raw))
    return path


def test_params_come_from_flag_env_or_file_in_that_order(tmp_path: Path) -> None:
    flag, env, in_file = (_params_file(tmp_path, f"{n}.json", temperature=t) for n, t in (("f", 2), ("e", 3), ("t", 4)))
    config = tmp_path / "rca.toml"
    config.write_text(f'params = "{in_file}"\n')
    environ = {"RCA_PARAMS": str(env), "RCA_CONFIG": str(config)}
    assert load_settings({}, {}).params is None
    assert load_settings({}, {"RCA_CONFIG": str(config)}).params == in_file
    assert load_settings({}, environ).params == env
    assert load_settings({"params": str(flag)}, environ).params == flag


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "no such file"),
        ("{", "not a health-parameters file"),
        ('{"healthy_scale": [1]}', "is missing"),
        ("activation", "activation must be"),
        ("nan", "temperature must be positive"),
        ("weights", "must lie in [0, 1]"),
    ],
)
def test_a_bad_params_file_is_a_startup_error_naming_key_and_source(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "bad.json"
    if content == "activation":
        path = _params_file(tmp_path, activation=[[0.5] * 8] * 2)
    elif content == "nan":
        path = _params_file(tmp_path, temperature=math.nan)
    elif content == "weights":
        path = _params_file(tmp_path, tail_weight=[1.5] * N_COLUMNS)
    elif content is not None:
        path.write_text(content)
    for flags, environ, source in (
        ({"params": str(path)}, {}, "--params"),
        ({}, {"RCA_PARAMS": str(path)}, "RCA_PARAMS"),
    ):
        with pytest.raises(ConfigError) as raised:
            load_settings(flags, environ)
        assert f"invalid value for params (from {source})" in str(raised.value) and says in str(raised.value)


def test_rca_serve_refuses_a_bad_params_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--params", str(tmp_path / "absent.json"), "--db", f"sqlite:///{tmp_path}/x.db"]) == 2
    assert "params (from --params)" in capsys.readouterr().err
