"""Fixtures of the interop tests: the reference, pi 0.73.1, as installed for them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

#: Where the helper's setup installs pi (``npm install @mariozechner/pi-coding-agent@0.73.1``).
PI_PACKAGE = Path("/tmp/pi/node_modules/@mariozechner/pi-coding-agent")


@pytest.fixture(scope="session")
def pi_package() -> Path:
    """The installed ``@mariozechner/pi-coding-agent`` directory; skips without it or node."""
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    if not (PI_PACKAGE / "package.json").is_file():
        pytest.skip(f"pi is not installed at {PI_PACKAGE}")
    return PI_PACKAGE
