"""The docs read whole as plain Markdown, as a code host shows them: nothing included or
generated at build time, copies equal to their sources, links relative and resolving."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md"))
READ_ON_A_CODE_HOST = [*PAGES, ROOT / "README.md"]

_spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
assert _spec is not None
assert _spec.loader is not None
generate: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)

#: Plain Markdown as a code host renders it: CommonMark with tables (markdown-it-py, which
#: rich brings), no MkDocs extension — no snippets, no mkdocstrings, no hooks.
PLAIN = MarkdownIt("commonmark").enable("table")

#: The least prose (words outside headings and ``::: name`` directives) a page may have.
LEAST_PROSE = 20


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def rendered(page: Path) -> list[Token]:
    """The page's tokens as plain Markdown renders them, inline children flattened."""
    tokens = []
    for token in PLAIN.parse(page.read_text(encoding="utf-8")):
        tokens.append(token)
        tokens.extend(token.children or [])
    return tokens


def prose_words(tokens: list[Token]) -> int:
    """Words of text outside headings and mkdocstrings' ``::: name`` lines."""
    words, in_heading = 0, False
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            in_heading = token.type == "heading_open"
        elif token.type == "inline" and not in_heading:
            lines = [line for line in token.content.splitlines() if not line.startswith(":::")]
            words += len(" ".join(lines).split())
    return words


def what_is_missing(page: Path) -> list[str]:
    """Why a page does not read whole as plain Markdown (nothing when it does)."""
    tokens = rendered(page)
    found = [f"a snippet include: {t.content.strip()}" for t in tokens if "--8<--" in t.content]
    if tokens and tokens[-1].type == "html_block":
        found.append(f"ends on a marker with nothing after it: {tokens[-1].content.strip()}")
    if prose_words(tokens) < LEAST_PROSE:
        found.append(f"{prose_words(tokens)} words of prose")
    return found


@pytest.mark.parametrize("page", READ_ON_A_CODE_HOST, ids=name)
def test_a_page_holds_no_include_and_is_not_empty(page: Path) -> None:
    """Rendered as plain Markdown, the page shows no snippet include, ends on no marker
    (where a build would fill something in), and has prose to read."""
    assert what_is_missing(page) == []


def test_the_check_finds_an_include_and_an_empty_page(tmp_path: Path) -> None:
    """The check above fails on what the docs were before: a page whose code is a snippet
    include, and the CLI reference that a build hook filled in after its marker."""
    include = tmp_path / "include.md"
    include.write_text(
        "# Quick start\n\nRuns offline, as written; the first reply fails with 503, the "
        "session waits and asks again, and the answer comes.\n\n"
        '```python\n--8<-- "docs/examples/q.py"\n```\n',
        encoding="utf-8",
    )
    assert what_is_missing(include) == ['a snippet include: --8<-- "docs/examples/q.py"']
    empty = tmp_path / "empty.md"
    empty.write_text("# CLI\n\nEvery command's help.\n\n<!-- cli-help -->\n", encoding="utf-8")
    assert what_is_missing(empty) == [
        "ends on a marker with nothing after it: <!-- cli-help -->",
        "3 words of prose",
    ]


def test_every_copy_equals_its_source() -> None:
    """Each block after an ``<!-- example: … -->`` mark is its file, byte for byte, and the
    CLI reference is the parser's ``--help`` (``python docs/generate.py`` rewrites them)."""
    assert generate.stale() == []


def test_every_example_is_shown_or_linked() -> None:
    """The marks name files that exist; the docs copy the examples a reader starts from."""
    copied = [path for page in PAGES for path in generate.example_sources(page.read_text())]
    assert all((ROOT / path).is_file() for path in copied)
    assert {
        "docs/examples/quickstart.py",
        "docs/examples/stream_reply.py",
        "docs/examples/rpc_client.py",
        "docs/examples/websocket_service.py",
    } <= set(copied)


def test_a_stale_copy_is_rewritten_from_its_file() -> None:
    """``with_examples`` replaces a marked block's old body by the file it names, and
    leaves the rest of the page alone."""
    page = (
        "Intro.\n\n<!-- example: docs/examples/quickstart.py -->\n```python\nold = 1\n```\n\n"
        "```python\nkept = 2\n```\n"
    )
    source = (ROOT / "docs" / "examples" / "quickstart.py").read_text(encoding="utf-8")
    assert generate.with_examples(page) == (
        "Intro.\n\n<!-- example: docs/examples/quickstart.py -->\n```python\n"
        f"{source}```\n\n```python\nkept = 2\n```\n"
    )


@pytest.mark.skipif(
    not generate.cli_page_checked(),
    reason="docs/cli-reference.md is written by Python 3.11's argparse (generate.CLI_PYTHON)",
)
def test_the_cli_reference_follows_the_parser() -> None:
    """docs/cli-reference.md shows every command's help as the parser makes it now: a
    page written from a parser with one more flag differs from it."""
    page = (ROOT / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    texts = generate.cli_help_texts()
    assert [prog for prog, _ in texts] == [
        "trio-session",
        "trio-session demo",
        "trio-session chat",
        "trio-session rpc",
        "trio-session conformance",
        "trio-session auth",
        "trio-session auth add",
        "trio-session auth list",
        "trio-session auth remove",
    ]
    for prog, text in texts:
        assert f"## `{prog}`\n\n```text\n{text.rstrip()}\n```\n" in page
    changed = [(prog, text.replace("-h, --help", "-h, --help, --new")) for prog, text in texts]
    assert generate.cli_reference(changed) not in page
    with pytest.raises(ValueError, match=r"^cli-reference\.md has no line '<!-- cli-help: "):
        generate.with_cli_help("# CLI\n")


#: A link target that names a place on the web (or a mail address), not a file.
EXTERNAL = re.compile(r"^(https?:|mailto:)")


def links(page: Path) -> list[str]:
    """Every link and image target of a page, as plain Markdown reads them."""
    found = []
    for token in rendered(page):
        if token.type == "link_open":
            found.append(str(token.attrs["href"]))
        elif token.type == "image":
            found.append(str(token.attrs["src"]))
    return found


@pytest.mark.parametrize("page", READ_ON_A_CODE_HOST, ids=name)
def test_every_link_is_relative_and_names_a_file(page: Path) -> None:
    """A link is to the web, to an anchor of the page, or a relative path to a file of the
    repository — so it works on a code host and in a copy alike."""
    broken = []
    for link in links(page):
        if EXTERNAL.match(link) or link.startswith("#"):
            continue
        path = unquote(urlsplit(link).path)
        if urlsplit(link).scheme or path.startswith("/"):
            broken.append(f"{link}: not relative")
        elif not (page.parent / path).resolve().is_file():
            broken.append(f"{link}: no such file")
    assert broken == []
