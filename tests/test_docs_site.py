"""The built docs site: every internal link resolves, and the pages load in a browser.

The site is built once per module with ``mkdocs build --strict``. The link check reads
every HTML file of it: each ``href``/``src`` on the site must name a file of the site, and
each ``#fragment`` an id in its target page. External links are listed, not fetched.

The browser check serves the site on 127.0.0.1 and opens pages in headless Chromium over
its DevTools pipe (``tests/cdp.py``): any uncaught exception, ``console.error``, error
log entry or failed request fails it. Without Chromium these tests are skipped — except
under ``CI=true``, where a missing browser is a failure (``.ci/run`` installs it).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import attrs
import pytest

from .cdp import Chromium, find_chromium

ROOT = Path(__file__).parent.parent

#: Attributes that point at another resource, by tag.
LINK_ATTRIBUTES = {
    "a": ("href",),
    "link": ("href",),
    "area": ("href",),
    "img": ("src",),
    "script": ("src",),
    "iframe": ("src",),
    "source": ("src",),
    "video": ("src",),
    "audio": ("src",),
}
#: Schemes that name no file of the site and nothing on the web to list.
INERT_SCHEMES = {"data", "mailto", "javascript", "blob", "tel"}


def in_ci() -> bool:
    """True under CI (``CI=true``): missing tools fail instead of skipping."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


# --- the link check ------------------------------------------------------------------


class _PageParser(HTMLParser):
    """Collects the ids and the outgoing links of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "a" and values.get("name"):
            self.ids.add(str(values["name"]))
        for attribute in LINK_ATTRIBUTES.get(tag, ()):
            value = values.get(attribute)
            if value is not None:
                self.links.append((f"<{tag} {attribute}>", value))


@attrs.frozen
class LinkReport:
    """What the link check found in a built site.

    Attributes:
        broken: One line per internal link that does not resolve: the page, the
            link, and why.
        external: Every link to another host, sorted, each once.
    """

    broken: list[str]
    external: list[str]


def check_links(site: Path) -> LinkReport:
    """Check every internal link and fragment of the HTML files under ``site``."""
    pages: dict[Path, _PageParser] = {}
    for html in sorted(site.rglob("*.html")):
        parser = _PageParser()
        parser.feed(html.read_text(encoding="utf-8"))
        parser.close()
        pages[html.resolve()] = parser
    broken: list[str] = []
    external: set[str] = set()
    for html, parser in pages.items():
        # The page's own address, as a browser sees it, relative to the site's root.
        here = "/" + html.relative_to(site.resolve()).as_posix()
        where = html.relative_to(site.resolve()).as_posix()
        for what, link in parser.links:
            parts = urlsplit(link)
            if parts.scheme in INERT_SCHEMES:
                continue
            if parts.scheme or parts.netloc:
                external.add(link)
                continue
            resolved = urlsplit(urljoin(here, link))
            target = _target_file(site, unquote(resolved.path))
            if target is None:
                broken.append(f"{where}: {what} {link!r}: no such file in the site")
                continue
            fragment = unquote(resolved.fragment)
            if not fragment:
                continue
            anchors = pages.get(target)
            if anchors is None:
                broken.append(f"{where}: {what} {link!r}: a #fragment into a file that is not HTML")
            elif fragment not in anchors.ids:
                broken.append(f"{where}: {what} {link!r}: no id {fragment!r} in that page")
    return LinkReport(broken=broken, external=sorted(external))


def _target_file(site: Path, path: str) -> Path | None:
    """The file of the site a URL path names (a directory means its index.html)."""
    root = site.resolve()
    candidate = (root / path.lstrip("/")).resolve()
    if not candidate.is_relative_to(root):
        return None
    if candidate.is_dir():
        candidate = candidate / "index.html"
    return candidate if candidate.is_file() else None


# --- serving and building --------------------------------------------------------------


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves a directory without logging every request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` over HTTP on 127.0.0.1 (a free port); yield its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built with ``mkdocs build --strict`` (once for this module)."""
    out = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """One headless Chromium for this module's browser tests."""
    executable = find_chromium()
    if executable is None:
        if in_ci():
            pytest.fail("chromium is not installed (.ci/run installs the chromium package)")
        pytest.skip("chromium is not installed")
    with Chromium(executable, tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


# --- link tests ------------------------------------------------------------------------


def test_internal_links_resolve(site: Path) -> None:
    """Every internal href/src of the built site names a file of it, every #fragment an id."""
    report = check_links(site)
    assert report.broken == []


def test_external_links_are_listed(site: Path) -> None:
    """External links are listed (not fetched); each names a host over http(s)."""
    report = check_links(site)
    print("external links:", *report.external, sep="\n  ")
    assert report.external, "the site links nowhere outside: the parse found no links?"
    for link in report.external:
        parts = urlsplit(link)
        assert parts.scheme in {"http", "https"}, link
        assert parts.netloc, link


def test_example_links_are_files_of_the_site(site: Path) -> None:
    """The example programs the pages link to are published with the site."""
    for page, example in [
        ("extensions/index.html", "extension_notify.py"),
        ("rpc/index.html", "rpc_client.py"),
    ]:
        assert f'href="../examples/{example}"' in (site / page).read_text(encoding="utf-8")
        published = site / "examples" / example
        assert published.read_bytes() == (ROOT / "docs" / "examples" / example).read_bytes()


def test_link_check_finds_each_kind_of_break(tmp_path: Path) -> None:
    """A missing file, a missing id, a fragment into a non-HTML file and a link out of
    the site are reported; good links, same-page fragments and external ones are not."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "plot.png").write_bytes(b"png")
    (tmp_path / "guide" / "index.html").write_text(
        '<h2 id="setup">Setup</h2><a name="old"></a><p id="x">x</p>', encoding="utf-8"
    )
    (tmp_path / "index.html").write_text(
        "<html><body><h1 id='top'>Home</h1>"
        '<a href="guide/">ok</a> <a href="guide/#setup">ok</a> <a href="guide/index.html#old">'
        'ok</a> <a href="#top">ok</a> <img src="img/plot.png"> <a href="mailto:a@b.c">ok</a>'
        '<a href="https://example.org/x#y">out</a> <a href="//cdn.example.net/a.js">out</a>'
        '<a href="examples/rpc_client.py">gone</a> <a href="guide/#nope">bad id</a>'
        '<img src="img/plot.png#frag"> <a href="#missing">bad</a> <a href="../../etc/passwd">'
        "out of the site</a></body></html>",
        encoding="utf-8",
    )
    report = check_links(tmp_path)
    assert report.broken == [
        "index.html: <a href> 'examples/rpc_client.py': no such file in the site",
        "index.html: <a href> 'guide/#nope': no id 'nope' in that page",
        "index.html: <img src> 'img/plot.png#frag': a #fragment into a file that is not HTML",
        "index.html: <a href> '#missing': no id 'missing' in that page",
        "index.html: <a href> '../../etc/passwd': no such file in the site",
    ]
    assert report.external == ["//cdn.example.net/a.js", "https://example.org/x#y"]


# --- browser tests ---------------------------------------------------------------------

#: The pages the browser opens, by their address in the site.
PAGES = {"home": "", "API reference": "reference/", "benchmarks": "benchmarks/"}


@pytest.mark.parametrize("path", PAGES.values(), ids=PAGES.keys())
def test_page_loads_without_errors(site: Path, chromium: Chromium, path: str) -> None:
    """The page loads with no uncaught exception, console error or failed request, its
    search worker included (what it asks of other hosts is listed, and not loaded)."""
    with serve(site) as base:
        report = chromium.open_page(base + path)
    print("asked of other hosts:", *report.external, sep="\n  ")
    assert report.errors == ()
    assert base + path in report.requested
    assert base + "search/search_index.json" in report.requested  # the worker was watched


def test_browser_check_catches_errors(tmp_path: Path, chromium: Chromium) -> None:
    """A page that logs console.error, throws, loads a missing image and starts a worker
    that throws and fetches a missing file: each is reported; console.log is not."""
    (tmp_path / "index.html").write_text(
        """<!doctype html><html><head><link rel="icon" href="data:,"></head><body>
<img src="missing.png">
<script>console.error("boom", 42); console.log("fine");</script>
<script>throw new Error("uncaught here");</script>
<script>new Worker("worker.js");</script>
<link rel="stylesheet" href="https://fonts.example.org/a.css">
</body></html>""",
        encoding="utf-8",
    )
    (tmp_path / "worker.js").write_text(
        'fetch("missing.json"); throw new Error("in the worker");', encoding="utf-8"
    )
    with serve(tmp_path) as base:
        report = chromium.open_page(base)
    assert sorted(report.errors) == sorted(
        [
            "console.error: boom 42",
            f"exception: Error: uncaught here\n    at {base}:4:15 ({base})",
            f"HTTP 404: {base}missing.png",
            "log error: Failed to load resource: the server responded with a status of 404"
            f" (File not found) ({base}missing.png)",
            f"log error: Uncaught Error: in the worker ({base}worker.js)",
            f"exception: Error: in the worker\n    at {base}worker.js:1:30 ({base}worker.js)",
            f"HTTP 404: {base}missing.json",
        ]
    )
    assert report.external == ("https://fonts.example.org/a.css",)


#: Measures the content column of a page: the tables, code blocks and API signatures
#: wider than their box (scrolled sideways), and how wide each plot is drawn.
LAYOUT_PROBE = """(() => {
  const content = document.querySelector("article.md-content__inner");
  const style = getComputedStyle(content);
  const column = content.clientWidth - parseFloat(style.paddingLeft)
    - parseFloat(style.paddingRight);
  const wide = [...content.querySelectorAll("table")]
    .filter((table) => {
      const wrap = table.closest(".md-typeset__scrollwrap") || table;
      return table.scrollWidth > table.clientWidth + 1 || wrap.scrollWidth > wrap.clientWidth + 1;
    })
    .map((table) => table.rows[0].innerText.replace(/\\s+/g, " ").slice(0, 60));
  const code = [...content.querySelectorAll("pre > code")]
    .filter((block) => block.scrollWidth > block.clientWidth + 1)
    .map((block) => {
      const where = block.closest(".doc-signature") ? "signature" : "code";
      const line = block.innerText.split("\\n").reduce((a, b) => (b.length > a.length ? b : a));
      return `${where}: ${line.slice(0, 60)}`;
    });
  const plots = [...content.querySelectorAll("img")]
    .filter((img) => img.getAttribute("src").includes("img/"))
    .map((img) => [img.getAttribute("src"), img.getBoundingClientRect().width]);
  return {column, wide, code, plots};
})()"""


def test_tables_fit_and_plots_span_the_column(site: Path, chromium: Chromium) -> None:
    """In a 1280×800 and a 1440×900 window, no table, code block or API signature of any
    page scrolls sideways; every plot of the benchmarks pages (one on the page, two in its
    lab notes) is drawn the full width of the content column."""
    pages = ["", *sorted(f"{p.parent.relative_to(site)}/" for p in site.glob("*/**/index.html"))]
    plotted = {"benchmarks/": 1, "benchmarks-notes/": 2}
    assert set(plotted) <= set(pages)
    wide: dict[str, list[str]] = {}
    probes: dict[str, Any] = {}
    with serve(site) as base:
        for width, height in [(1280, 800), (1440, 900)]:
            for path in pages:
                report = chromium.open_page(
                    base + path, probe=LAYOUT_PROBE, width=width, height=height
                )
                if report.probe["wide"] or report.probe["code"]:
                    wide[f"{path} at {width}"] = report.probe["wide"] + report.probe["code"]
                if path in plotted and width == 1440:
                    probes[path] = report.probe
    assert wide == {}
    for path, count in plotted.items():
        probe = probes[path]
        assert len(probe["plots"]) == count, path
        for src, drawn in probe["plots"]:
            assert drawn == pytest.approx(probe["column"], abs=1), src
        assert probe["column"] > 800  # wider than Material's default column (688 px)


def test_quickstart_prints_what_the_home_page_shows() -> None:
    """docs/examples/quickstart.py prints the output docs/index.md shows under it."""
    example = ROOT / "docs" / "examples" / "quickstart.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    home = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert "<!-- example: docs/examples/quickstart.py -->" in home
    assert f"```text\n{out}```" in home
    assert out == "retry 1 of 3 in 100 ms\nHi!\n"


# --- a newcomer's way through the site (issue 32) -------------------------------------


def content_links(page: Path) -> list[str]:
    """The links of a built page's content column (not its navigation or footer)."""
    text = page.read_text(encoding="utf-8")
    start = text.index('<article class="md-content__inner md-typeset">')
    parser = _PageParser()
    parser.feed(text[start : text.index("</article>", start)])
    parser.close()
    return [link for what, link in parser.links if what == "<a href>"]


def test_every_page_is_two_clicks_from_getting_started(site: Path) -> None:
    """From Getting started, every page of the site is reached in at most two clicks on
    links in the pages' text (the navigation bar not counted)."""
    root = site.resolve()
    start = root / "getting-started" / "index.html"
    reached = {start: 0}
    frontier = [start]
    for clicks in (1, 2):
        found = []
        for page in frontier:
            here = "/" + page.relative_to(root).as_posix()
            for link in content_links(page):
                parts = urlsplit(urljoin(here, link))
                if parts.scheme or parts.netloc:
                    continue
                target = _target_file(site, unquote(parts.path))
                if target is not None and target.suffix == ".html" and target not in reached:
                    reached[target] = clicks
                    found.append(target)
        frontier = found
    pages = {p.resolve() for p in site.rglob("index.html")} - {root / "index.html"}
    pages.add(root / "index.html")
    assert sorted(p.relative_to(root).as_posix() for p in pages - reached.keys()) == []


CLI_COMMANDS = [
    [],
    ["demo"],
    ["chat"],
    ["rpc"],
    ["conformance"],
    ["auth"],
    ["auth", "add"],
    ["auth", "list"],
    ["auth", "remove"],
]


def code_blocks(page: Path) -> list[str]:
    """The text of each ``<pre><code>`` block of a built page, as a reader sees it."""
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"<pre[^>]*>(?:<span></span>)?<code[^>]*>(.*?)</code></pre>", text, re.S)
    return [unescape(re.sub(r"<[^>]+>", "", block)) for block in blocks]


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="docs/cli-reference.md is written by Python 3.11's argparse (docs/generate.py)",
)
def test_the_cli_reference_is_the_programs_own_help(site: Path) -> None:
    """The CLI reference page shows, for the command and each subcommand, exactly what
    ``trio-session … --help`` prints in an 80-column terminal, and nothing else."""
    expected = []
    for words in CLI_COMMANDS:
        result = subprocess.run(
            [sys.executable, "-m", "trio_session", *words, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "COLUMNS": "80"},
        )
        expected.append(result.stdout)
    shown = code_blocks(site / "cli-reference" / "index.html")
    assert shown == expected


def test_api_signatures_are_formatted_to_fit(site: Path) -> None:
    """Long API signatures are broken over lines (formatted by ruff, the docs extra's):
    OpenAIProvider's takes one parameter a line, and no class or function signature of
    the API reference has a line over 80 characters."""
    signatures: dict[str, str] = {}
    for page in sorted((site / "reference").glob("*/index.html")):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(
            r'<h\d id="([^"]+)"[^>]*>(?:(?!</h\d>).)*</h\d>\s*<div class="[^"]*doc-signature[^"]*">'
            r"<pre><span></span><code>(.*?)</code></pre>",
            text,
            re.S,
        ):
            signatures[match.group(1)] = unescape(re.sub(r"<[^>]+>", "", match.group(2)))
    provider = signatures["trio_session.OpenAIProvider"].splitlines()
    assert provider[0] == "OpenAIProvider("
    assert provider[1:3] == ["    *,", "    api_key: str | None = None,"]
    wide = {
        name: max(map(len, text.splitlines()))
        for name, text in signatures.items()
        if max(map(len, text.splitlines())) > 80
        and not name.rsplit(".", 1)[-1].isupper()  # a constant's value
    }
    assert wide == {}
