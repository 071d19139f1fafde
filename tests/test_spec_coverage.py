"""Every SPEC rule in the retry core's scope is cited by at least one test docstring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

#: Every rule of SPEC.md: the retry core (R-1 … R-37, R-43 … R-45a, R-49 … R-52), the
#: providers (R-28a), RPC (R-39 … R-42) and the terminal UI (R-46 … R-48).
RULES = [f"R-{n}" for n in range(1, 53)] + ["R-15a", "R-20a", "R-23a", "R-28a", "R-34a", "R-45a"]
CITATION = re.compile(r"R-(\d+[a-z]?)(?:\(\w\))?")
RANGE = re.compile(r"R-(\d+)\s*[–-]\s*R-(\d+)")


def cited_rules() -> set[str]:
    """Rule ids named in the docstrings of test functions under tests/."""
    cited: set[str] = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                cited.update(f"R-{m}" for m in CITATION.findall(doc))
                for start, end in RANGE.findall(doc):
                    cited.update(f"R-{n}" for n in range(int(start), int(end) + 1))
    return cited


def test_every_rule_has_a_test() -> None:
    """Acceptance: one or more tests name each rule of SPEC.md, R-1 … R-52."""
    assert sorted(set(RULES) - cited_rules()) == []
