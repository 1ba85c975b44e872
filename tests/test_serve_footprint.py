"""What a running `rca serve` holds in memory beyond its data: libraries it never uses stay out."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import Server


def test_the_server_leaves_pandas_unloaded_though_scikit_learn_would_import_it(server: Server) -> None:
    maps = Path(f"/proc/{server.process.pid}/maps").read_text()
    assert "/sklearn/" in maps  # the alert clustering's compiled modules: the map lists extension modules
    if importlib.util.find_spec("pandas") is not None:  # the bench extra installs it
        assert "/pandas/" not in maps
