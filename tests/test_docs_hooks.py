"""docs/hooks.py: every rule id in the rendered site links to its rule in docs/spec.md."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import cast

import pytest

ROOT = Path(__file__).parent.parent
_spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
assert _spec is not None
assert _spec.loader is not None
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)

LinkRules = Callable[[str, str, Collection[str]], tuple[str, list[str]]]
link_rules = cast(LinkRules, hooks.link_rules)
rule_anchors = cast(Callable[[str], list[str]], hooks.rule_anchors)

ANCHORS = {"7", "7a", "7b", "15", "15a", "16", "17", "29", "33", "39", "42"}


def linked(html: str, url: str = "../spec/") -> str:
    """``html`` with its rule ids linked; fails if any id is unknown."""
    out, unknown = link_rules(html, url, ANCHORS)
    assert unknown == []
    return out


def ref(text: str, anchor: str, url: str = "../spec/") -> str:
    return f'<a class="rule-ref" style="white-space: nowrap" href="{url}#r-{anchor}">{text}</a>'


def test_bare_ids_become_links_relative_to_the_page() -> None:
    """R-15 and R-15a in running text link to their anchors, by the URL given."""
    assert linked("<p>See R-15 and R-15a.</p>") == (
        f"<p>See {ref('R-15', '15')} and {ref('R-15a', '15a')}.</p>"
    )
    assert linked("<p>R-16</p>", url="") == f"<p>{ref('R-16', '16', url='')}</p>"


def test_a_rule_part_links_to_its_own_anchor_when_the_spec_has_one() -> None:
    """R-7(b) → #r-7b (defined); R-17(b) → #r-17 (no part anchor); the text keeps "(b)"."""
    assert linked("<p>R-7(b), R-17(b)</p>") == (
        f"<p>{ref('R-7(b)', '7b')}, {ref('R-17(b)', '17')}</p>"
    )


def test_each_end_of_a_range_links_to_its_rule() -> None:
    """R-39 … R-42 and R-29–R-33: both ends linked, the text between kept."""
    assert linked("<li>R-39 … R-42; R-29–R-33</li>") == (
        f"<li>{ref('R-39', '39')} … {ref('R-42', '42')}; "
        f"{ref('R-29', '29')}–{ref('R-33', '33')}</li>"
    )


@pytest.mark.parametrize(
    "html",
    [
        '<p><a href="x.md">R-15</a></p>',
        "<p><code>R-15</code></p>",
        '<pre><code class="language-text">R-15 … R-16\n</code></pre>',
        '<h2 id="r-15-title">R-15 <a class="headerlink" href="#r-15-title">¶</a></h2>',
        '<li><a id="r-15" href="#r-15"><strong>R-15</strong></a> text</li>',
        "<script>var s = 'R-15';</script><style>/* R-15 */</style>",
        "<!-- R-15 -->",
        '<img alt="R-15" title="R-16">',
        "<p>XR-15, R-15ab, HR-1, R-, R-a, R-15_</p>",
    ],
    ids=[
        "link",
        "code",
        "pre",
        "heading",
        "anchor-definition",
        "script-style",
        "comment",
        "attributes",
        "not-an-id",
    ],
)
def test_ids_are_left_alone_where_a_link_does_not_belong(html: str) -> None:
    """Inside links (and spec.md's own anchors), code, headings, scripts, comments,
    attributes, and in words that only look like an id: unchanged, nothing unknown."""
    assert link_rules(html, "../spec/", ANCHORS) == (html, [])


def test_linking_resumes_after_a_skipped_element() -> None:
    """Text after ``</code>``, ``</a>`` or a heading is linked again, nesting included."""
    html = (
        "<p><a href='y'><code>R-15</code> R-16</a> R-16 <code>R-17</code> R-17</p><h3>R-15</h3>R-29"
    )
    assert linked(html) == (
        "<p><a href='y'><code>R-15</code> R-16</a> "
        f"{ref('R-16', '16')} <code>R-17</code> {ref('R-17', '17')}</p><h3>R-15</h3>"
        f"{ref('R-29', '29')}"
    )


def test_a_quoted_angle_bracket_in_an_attribute_is_part_of_the_tag() -> None:
    """``title="a > R-15"`` stays an attribute: its id is not linked, the text is."""
    html = '<span title="a > R-15">R-16</span>'
    assert linked(html) == f'<span title="a > R-15">{ref("R-16", "16")}</span>'


def test_an_unknown_id_is_left_unlinked_and_reported() -> None:
    """R-99 is not in the spec: kept as text, and named (once per citation)."""
    assert link_rules("<p>R-99 and R-15, R-99</p>", "", ANCHORS) == (
        f"<p>R-99 and {ref('R-15', '15', url='')}, R-99</p>",
        ["R-99", "R-99"],
    )


def test_linking_twice_changes_nothing_more() -> None:
    """The rewrite is idempotent: its own links are links, so they are skipped."""
    once = linked("<p>R-7(b), R-39 … R-42</p>")
    assert linked(once) == once


def test_rule_anchors_are_read_from_the_spec_source() -> None:
    """``rule_anchors`` finds the ``<a id="r-…">`` definitions, in order."""
    source = '- <a id="r-7" href="#r-7">**R-7**</a> x\n    - <a id="r-7a" href="#r-7a">**(a)**</a>'
    assert rule_anchors(source) == ["7", "7a"]


def test_the_built_site_links_every_rule_id(tmp_path: Path) -> None:
    """``mkdocs build --strict`` (hook wired in mkdocs.yml) links the rule ids of the API
    reference rendered from docstrings, relative to the page; spec.md links within itself."""
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert result.returncode == 0, result.stderr
    reference = (site / "reference" / "session" / "index.html").read_text(encoding="utf-8")
    assert ref("R-29", "29", url="../../spec/") in reference  # abort_retry()'s docstring
    spec = (site / "spec" / "index.html").read_text(encoding="utf-8")
    assert ref("R-20", "20", url="") in spec
    assert '<a id="r-15" href="#r-15"><strong>R-15</strong></a>' in spec
