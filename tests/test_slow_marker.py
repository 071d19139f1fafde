"""The ``slow`` marker (issue 25): ``pytest -m "not slow"`` is a quick run for a newcomer.

tests/conftest.py marks whole end-to-end modules and single seconds-long tests; plain
``pytest`` (the README's command, and CI's) still runs everything.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SLOW_MODULES, SLOW_TESTS

TESTS = Path(__file__).resolve().parent
SAMPLE = ("test_backoff.py", "test_conformance.py", "test_tui_tmux.py")


def test_the_slow_marker_is_registered(pytestconfig: pytest.Config) -> None:
    """pyproject registers ``slow`` (``--strict-markers`` refuses an unknown marker)."""
    names = [line.split(":", 1)[0].strip() for line in pytestconfig.getini("markers")]
    assert "slow" in names


def test_every_listed_slow_test_exists() -> None:
    """A renamed module or test would fall back into the quick run unnoticed: none is."""
    for module in SLOW_MODULES:
        assert (TESTS / module).exists(), module
    for module, names in SLOW_TESTS.items():
        tree = ast.parse((TESTS / module).read_text(encoding="utf-8"))
        defined = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        assert names <= defined, (module, names - defined)


def _collected(selection: str) -> set[str]:
    """The test ids of ``SAMPLE`` that ``-m SELECTION`` collects."""
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, "-m", selection, *(f"tests/{module}" for module in SAMPLE)],
        capture_output=True,
        text=True,
        check=False,
        cwd=TESTS.parent,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


def test_not_slow_keeps_the_quick_tests_and_drops_the_slow_ones() -> None:
    """Of a quick module, a mixed one and an end-to-end one, ``-m "not slow"`` keeps the
    quick tests (not none) and ``-m slow`` exactly the listed ones."""
    quick, slow = _collected("not slow"), _collected("slow")
    assert quick
    assert not quick & slow

    def names(ids: set[str], module: str) -> set[str]:
        return {i.split("::")[1].split("[")[0] for i in ids if i.startswith(f"tests/{module}")}

    assert names(slow, "test_conformance.py") == SLOW_TESTS["test_conformance.py"]
    assert names(quick, "test_conformance.py") >= {"test_the_loopback_server_steps"}
    assert names(quick, "test_backoff.py")
    assert not names(slow, "test_backoff.py")
    assert names(slow, "test_tui_tmux.py")
    assert not names(quick, "test_tui_tmux.py")
