"""Debian binaries some tests drive for real. Tests never install anything: `make test-deps` (run by
`make test`) installs them ahead, and a test whose binary is missing skips saying so."""

from __future__ import annotations

import os

import pytest


def ensure_binary(binary: str, package: str) -> str:
    """The path `binary` when it exists; else the calling test skips, naming Debian's `package`."""
    if not os.path.exists(binary):
        pytest.skip(f"{binary} missing: install Debian's {package} (`make test-deps`, as root)")
    return binary
