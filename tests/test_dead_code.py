"""No dead code in the package (issue 40): vulture reads it with its tests, examples and
benchmarks, and reports nothing of ``trio_session/`` ([tool.vulture] lists the names it
cannot see used)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
READ = ["trio_session", "tests", "docs/examples", "docs/hooks.py", "docs/griffe_attrs.py"]


def test_the_package_has_no_dead_code() -> None:
    """Every function, class, variable and attribute of the package is used somewhere."""
    vulture = pytest.importorskip("vulture")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["vulture"]
    finder = vulture.Vulture(ignore_names=config["ignore_names"])
    finder.scavenge([str(ROOT / p) for p in [*READ, "benchmarks"]], exclude=["node_modules"])
    package = ROOT / "trio_session"
    dead = [
        item.get_report(add_size=False)
        for item in finder.get_unused_code(min_confidence=config["min_confidence"])
        if Path(item.filename).is_relative_to(package)
    ]
    assert dead == [], "\n".join(dead)
