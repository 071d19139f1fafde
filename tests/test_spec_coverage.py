"""docs/spec.md and its citations agree: each cited rule exists, each rule has a test.

The rule list is read from docs/spec.md itself: a rule is a list item whose label is
``<a id="r-15" href="#r-15">**R-15**</a>``; a lettered part of one (``R-7(b)``) is
labelled ``<a id="r-7b" href="#r-7b">**(b)**</a>`` inside it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
SPEC = ROOT / "docs" / "spec.md"

#: A rule or a part, as docs/spec.md labels it.
LABEL = re.compile(
    r'<a id="r-(?P<id>\d+[a-z]?)" href="#r-(?P<href>\d+[a-z]?)">'
    r"\*\*(?P<label>R-\d+[a-z]?|\([a-z]\))\*\*</a>"
)
#: Any anchor definition, labelled or not.
ANCHOR = re.compile(r'<a id="r-(\d+[a-z]?)"')
#: A rule label with or without its anchor: ``**R-15**`` at the start of a list item.
RULE_ITEM = re.compile(r"^\s*- (?:<a [^>]*>)?\*\*R-(\d+[a-z]?)\*\*", re.MULTILINE)
#: A citation: ``R-15``, ``R-34a``, ``R-7(b)``. Each end of a range is one.
CITATION = re.compile(r"(?<!\w)R-(\d+[a-z]?)(?:\(([a-z])\))?(?!\w)")

#: Where rules are cited.
CITING = [ROOT / "trio_session", ROOT / "docs", ROOT / "tests", ROOT / "benchmarks"]
#: Files whose rule ids are test data, not citations (the rule-link hook's tests).
NOT_CITATIONS = {ROOT / "tests" / "test_docs_hooks.py"}


def spec_rules() -> tuple[list[str], dict[str, list[str]]]:
    """The rules of docs/spec.md in order (``["R-1", …]``), and each rule's parts."""
    rules: list[str] = []
    parts: dict[str, list[str]] = {}
    for match in LABEL.finditer(SPEC.read_text(encoding="utf-8")):
        label = match["label"]
        if label.startswith("R-"):
            rules.append(label)
        else:
            parts.setdefault(rules[-1], []).append(label[1])
    return rules, parts


def citing_files() -> list[Path]:
    """The .py and .md files that may cite rules, README.md included."""
    files = [ROOT / "README.md"]
    for top in CITING:
        files += sorted(p for ext in ("*.py", "*.md") for p in top.rglob(ext))
    return [p for p in files if p not in NOT_CITATIONS and ".venv" not in p.parts]


def test_the_rule_list_is_read_from_the_spec() -> None:
    """docs/spec.md defines R-1 … R-69 and the lettered rules, in order; R-7 has parts."""
    rules, parts = spec_rules()
    numbered = [f"R-{n}" for n in range(1, 70)]
    assert [r for r in rules if r[-1].isdigit()] == numbered
    assert sorted(r for r in rules if not r[-1].isdigit()) == [
        "R-15a",
        "R-20a",
        "R-23a",
        "R-28a",
        "R-28b",
        "R-34a",
        "R-36a",
        "R-45a",
        "R-53a",
        "R-53b",
        "R-56a",
        "R-56b",
        "R-56c",
        "R-56d",
        "R-56e",
        "R-56f",
        "R-56g",
        "R-56h",
    ]
    assert parts == {"R-7": ["a", "b"]}


def test_every_rule_has_an_anchor() -> None:
    """Each rule and part of docs/spec.md is labelled by an anchor of its own id (#r-15),
    linking to itself; no anchor is defined twice, and none is left without a label."""
    text = SPEC.read_text(encoding="utf-8")
    labels = list(LABEL.finditer(text))
    assert all(m["id"] == m["href"] for m in labels)
    rules, parts = spec_rules()
    for match in labels:
        label = match["label"]
        if label.startswith("R-"):
            assert match["id"] == label.removeprefix("R-")
    expected = [r.removeprefix("R-") for r in rules]
    expected += [r.removeprefix("R-") + p for r, ps in parts.items() for p in ps]
    anchors = ANCHOR.findall(text)
    assert sorted(anchors) == sorted(expected)
    assert len(set(anchors)) == len(anchors)
    assert [f"R-{n}" for n in RULE_ITEM.findall(text)] == rules


def test_every_cited_rule_is_in_the_spec() -> None:
    """Each R-… cited in trio_session/, docs/, tests/, benchmarks/ and README.md is a rule
    of docs/spec.md; each cited part (R-7(b)) is a part of it."""
    rules, parts = spec_rules()
    missing: list[str] = []
    files = citing_files()
    assert len(files) > 50
    for path in files:
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for rule, part in CITATION.findall(line):
                cited = f"R-{rule}" + (f"({part})" if part else "")
                if f"R-{rule}" not in rules or (part and part not in parts.get(f"R-{rule}", [])):
                    missing.append(f"{path.relative_to(ROOT)}:{line_no}: {cited}")
    assert missing == []


def test_readme_links_the_spec() -> None:
    """README.md points at docs/spec.md, which exists (there is no SPEC.md)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/spec.md)" in readme
    assert "SPEC.md" not in readme
    assert SPEC.is_file()


def cited_in_test_docstrings() -> set[str]:
    """Rule ids named in the docstrings of test functions under tests/."""
    cited: set[str] = set()
    range_ = re.compile(r"R-(\d+)\s*(?:…|\.\.\.|–|-)\s*R-(\d+)")
    for path in Path(__file__).parent.glob("test_*.py"):
        if path in NOT_CITATIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                cited.update(f"R-{rule}" for rule, _part in CITATION.findall(doc))
                for start, end in range_.findall(doc):
                    cited.update(f"R-{n}" for n in range(int(start), int(end) + 1))
    return cited


def test_every_rule_has_a_test() -> None:
    """Acceptance: one or more test docstrings name each rule of docs/spec.md."""
    rules, _parts = spec_rules()
    assert sorted(set(rules) - cited_in_test_docstrings()) == []


def test_spec_timelines_are_what_the_code_does() -> None:
    """R-23a, R-15, R-30, R-31, R-36a, R-50: each timeline block of docs/spec.md is, line
    for line, what ``python docs/examples/spec_timelines.py <scenario>`` prints today."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "spec_timelines.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    printed = {
        name.strip(): body.strip("\n")
        for name, _, body in (chunk.partition("\n") for chunk in out.split("## ")[1:])
    }
    block = re.compile(r"<!-- spec_timelines\.py (\w+) -->\n```text\n(.*?)\n```", re.DOTALL)
    shown = dict(block.findall(SPEC.read_text(encoding="utf-8")))
    assert sorted(shown) == sorted(printed)
    for name, lines in printed.items():
        assert shown[name] == lines, name
