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


DOC_PAGES = sorted((Path(__file__).parent.parent / "docs").glob("*.md"))


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.name)
def test_doc_page_python_blocks_compile_and_import(page: Path) -> None:
    """Every ```python block in docs/*.md compiles (top-level await allowed) and every
    name it imports from trio_session exists; whole programs live in docs/examples."""
    import ast
    import importlib

    text = page.read_text(encoding="utf-8")
    for block in (b.split("```", 1)[0] for b in text.split("```python\n")[1:]):
        tree = compile(block, str(page), "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        assert isinstance(tree, ast.Module)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trio_session"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{page.name}: {node.module}.{alias.name}"
