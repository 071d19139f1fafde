"""MkDocs hook: every rule id in the rendered site links to its rule in docs/spec.md.

The code, the docs and the docstrings cite the retry contract by rule id
(``R-15``, ``R-34a``, ``R-7(b)``, ranges such as ``R-39 … R-42``). Rather than
writing each link by hand, this hook rewrites the HTML of every page once it
is rendered — narrative pages and the API reference that mkdocstrings renders
from docstrings alike — so that each bare id becomes a link to its anchor:
``R-15`` → ``spec/#r-15``, with the URL relative to the page.

A rule part such as ``R-7(b)`` links to its own anchor (``#r-7b``) when
docs/spec.md defines one, else to the rule. In a range each end links to its
own rule. Ids are left alone inside existing links (docs/spec.md's own anchor
definitions are links to themselves), inside ``<code>``, ``<pre>``,
``<script>`` and ``<style>``, and in headings. An id that docs/spec.md does not
define is not linked, and is reported as a warning (an error under
``mkdocs build --strict``).

Rule anchors are the ``<a id="r-…">`` elements of docs/spec.md's source.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

#: Under "mkdocs", so that ``--strict`` counts its warnings. (Not mkdocs'
#: ``get_plugin_logger``: the tests import this module without MkDocs.)
log = logging.getLogger("mkdocs.hooks.rule_links")

#: The page that defines the rules, relative to ``docs_dir``.
SPEC_PAGE = "spec.md"

#: A rule id as the project cites it: ``R-15``, ``R-34a``, ``R-7(b)``.
RULE_ID = re.compile(r"(?<!\w)R-(\d+[a-z]?)(?:\(([a-z])\))?(?!\w)")

#: An anchor definition in docs/spec.md: ``<a id="r-15" …>``.
ANCHOR_DEFINITION = re.compile(r"""<a\s+id=["']r-(\d+[a-z]?)["']""")

#: One markup token of rendered HTML: a comment or a tag (quoted ``>`` allowed).
MARKUP = re.compile(r"""<!--.*?-->|<(?:[^>"']|"[^"]*"|'[^']*')*>""", re.DOTALL)
TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)")

#: A rule link's class, and no line break inside "R-28" (the site's CSS is not ours).
LINK_ATTRIBUTES = 'class="rule-ref" style="white-space: nowrap"'

#: Elements whose text is never rewritten.
SKIPPED = frozenset(
    {"a", "code", "pre", "script", "style", "textarea", "h1", "h2", "h3", "h4", "h5", "h6"}
)


def rule_anchors(spec_source: str) -> list[str]:
    """The rule anchors docs/spec.md defines, in order (``["1", "2", …, "7a", …]``)."""
    return ANCHOR_DEFINITION.findall(spec_source)


def link_rules(html: str, spec_url: str, anchors: Collection[str]) -> tuple[str, list[str]]:
    """Turn each bare rule id of ``html`` into a link to its rule.

    Args:
        html: a rendered page (or part of one).
        spec_url: the URL of the spec page relative to this page (``"../spec/"``);
            empty on the spec page itself, for links to ``#r-…`` on the same page.
        anchors: the rule anchors the spec defines, without their ``r-`` prefix.

    Returns:
        The rewritten HTML, and the ids cited in it that the spec does not define
        (left as they were), in order of appearance.
    """
    out: list[str] = []
    unknown: list[str] = []
    open_skipped: Counter[str] = Counter()

    def link(match: re.Match[str]) -> str:
        rule, part = match.group(1), match.group(2)
        if rule not in anchors:
            unknown.append(match.group(0))
            return match.group(0)
        target = rule + part if part and rule + part in anchors else rule
        return f'<a {LINK_ATTRIBUTES} href="{spec_url}#r-{target}">{match.group(0)}</a>'

    position = 0
    for token in MARKUP.finditer(html):
        text = html[position : token.start()]
        out.append(text if any(open_skipped.values()) else RULE_ID.sub(link, text))
        out.append(token.group(0))
        position = token.end()
        tag = TAG.match(token.group(0))
        if tag is None:
            continue  # a comment or a declaration
        closing, name = tag.group(1) == "/", tag.group(2).lower()
        if name not in SKIPPED:
            continue
        if closing:
            open_skipped[name] = max(0, open_skipped[name] - 1)  # a stray end tag: ignore
        elif not token.group(0).endswith("/>"):
            open_skipped[name] += 1
    rest = html[position:]
    out.append(rest if any(open_skipped.values()) else RULE_ID.sub(link, rest))
    return "".join(out), unknown


def on_page_content(html: str, /, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Link the rule ids of one rendered page (an MkDocs event hook)."""
    spec = files.get_file_from_path(SPEC_PAGE)
    if spec is None:
        log.warning("no %s in the docs: rule ids are left unlinked", SPEC_PAGE)
        return html
    source = spec.content_string
    spec_url = "" if page.file.src_uri == SPEC_PAGE else spec.url_relative_to(page.file)
    linked, unknown = link_rules(html, spec_url, set(rule_anchors(source)))
    for rule in dict.fromkeys(unknown):
        log.warning("%s cites %s, which %s does not define", page.file.src_uri, rule, SPEC_PAGE)
    return linked
