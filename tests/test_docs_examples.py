"""Every runnable example under docs/examples runs and prints what the docs say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "docs" / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(example: Path) -> None:
    """The example exits 0 without writing to stderr."""
    result = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_retry_timeline_matches_the_docs() -> None:
    """docs/index.md's default timeline: retries at 2 s and 6 s, prompt() returns at 6 s."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "retry_timeline.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert [line[:7] for line in out] == ["t= 0.0s"] * 3 + ["t= 2.0s"] * 3 + ["t= 6.0s"] * 4
    assert "'delayMs': 2000" in out[2]
    assert "'delayMs': 4000" in out[5]
    assert out[-1] == "t= 6.0s  prompt() returned: 'Hello!'"


def test_readme_python_blocks_run(tmp_path: Path) -> None:
    """Every ```python block in README.md runs as written."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    assert blocks, "README.md has no python example"
    for i, block in enumerate(blocks):
        script = tmp_path / f"readme_{i}.py"
        script.write_text(block, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr
