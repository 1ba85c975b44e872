"""Debian binaries some tests drive for real: installed when missing (as root, apt-get, bounded),
else the test skips saying why (`make test-deps` installs them ahead)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

APT_TIMEOUT_S = 300


def ensure_binary(binary: str, package: str) -> str:
    """The path of `binary`, installing Debian's `package` first when it is missing."""
    if os.path.exists(binary):
        return binary
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(f"{binary} missing; install Debian's {package} (make test-deps as root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", package]
    try:
        if subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=True)
            subprocess.run(install, env=env, capture_output=True, timeout=APT_TIMEOUT_S, check=True)
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"could not install {package} with apt-get: {exc}")
    if not os.path.exists(binary):
        pytest.skip(f"apt-get installed {package} but {binary} is absent")
    return binary
