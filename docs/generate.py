"""Write the parts of the docs that are copies, so every page is whole as plain Markdown.

A page read on a code host is read as it is in the repository: nothing is included or
generated when it is shown. So what a page shows from elsewhere is written into it,
and a test (tests/test_docs_plain.py) fails when a copy differs from its source:

- **Examples.** A fenced block right after a ``<!-- example: docs/examples/NAME.py -->``
  line is a copy of that file (the file stays: CI runs it). ``python docs/generate.py``
  rewrites each such block from its file. ``<!-- fmt:off -->`` / ``<!-- fmt:on -->``
  around a copy keep ruff, which formats a page's Python blocks at the repository's
  line length, from rewrapping what docs/examples/ruff.toml formats at 80 columns.
- **The command-line reference.** docs/cli-reference.md's part after
  ``<!-- cli-help: written by docs/generate.py -->`` is each command's ``--help``, made
  from the program's own argument parser at 80 columns.

Run ``python docs/generate.py`` after changing an example or a command's arguments;
``python docs/generate.py --check`` writes nothing and exits 1 naming the stale pages.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: The line before a block that is a copy of a file: ``<!-- example: docs/examples/x.py -->``.
EXAMPLE_MARK = re.compile(
    r"^<!-- example: (?P<path>\S+) -->\n(?P<fence>`{3,})(?P<info>[^\n]*)\n", re.MULTILINE
)

#: The page the command-line help is written on, and where on it the help starts.
CLI_PAGE = DOCS / "cli-reference.md"
CLI_MARK = "<!-- cli-help: written by docs/generate.py -->\n"

#: The width the help is wrapped at, as ``COLUMNS=80 trio-session … --help`` prints it.
CLI_WIDTH = 80


def with_examples(page: str) -> str:
    """``page`` with each block after an example mark replaced by the file it names.

    Args:
        page: a Markdown page's text.

    Returns:
        The page with every marked block equal to its file (paths relative to the
        repository's root).
    """
    out: list[str] = []
    position = 0
    for mark in EXAMPLE_MARK.finditer(page):
        fence = mark.group("fence")
        end = page.index(f"\n{fence}\n", mark.end() - 1)
        source = (ROOT / mark.group("path")).read_text(encoding="utf-8")
        out.append(page[position : mark.end()])
        out.append(source if source.endswith("\n") else source + "\n")
        position = end + 1
    out.append(page[position:])
    return "".join(out)


def example_sources(page: str) -> list[str]:
    """The files a page's marked blocks are copies of, in order."""
    return [m.group("path") for m in EXAMPLE_MARK.finditer(page)]


def cli_help_texts(width: int = CLI_WIDTH) -> list[tuple[str, str]]:
    """Each command's ``--help`` text, ``trio-session`` first, then every subcommand.

    Args:
        width: the terminal width the help is wrapped for (argparse's ``COLUMNS``).

    Returns:
        ``(command line, help text)`` pairs: ``("trio-session auth add", "usage: …")``.
    """
    from trio_session.cli._args import parser

    found: list[tuple[str, str]] = []

    def walk(command: argparse.ArgumentParser) -> None:
        found.append((command.prog, command.format_help()))
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    walk(sub)

    # argparse reads the width from COLUMNS when a parser and its help are made.
    with mock.patch.dict(os.environ, {"COLUMNS": str(width)}):
        walk(parser())
    return found


def cli_reference(texts: list[tuple[str, str]]) -> str:
    """The help texts as Markdown: a heading and a ``text`` block per command.

    Args:
        texts: ``(command line, help text)`` pairs, as ``cli_help_texts`` gives them.

    Returns:
        The Markdown that follows the page's mark.
    """
    return "\n".join(f"## `{prog}`\n\n```text\n{text.rstrip()}\n```\n" for prog, text in texts)


def with_cli_help(page: str) -> str:
    """docs/cli-reference.md's text with everything after its mark made from the parser.

    Raises:
        ValueError: the page has no mark.
    """
    if CLI_MARK not in page:
        msg = f"{CLI_PAGE.name} has no line {CLI_MARK.strip()!r}: nowhere to write the help"
        raise ValueError(msg)
    head = page[: page.index(CLI_MARK) + len(CLI_MARK)]
    return f"{head}\n{cli_reference(cli_help_texts())}"


#: The Python whose argparse writes docs/cli-reference.md, the oldest supported one.
#: argparse lays help out differently from one version to the next (3.13 wraps a long
#: usage line elsewhere than 3.11), so the page is written, and checked, on this one.
CLI_PYTHON = (3, 11)


def cli_page_checked() -> bool:
    """Whether this Python writes the CLI reference as it is committed (``CLI_PYTHON``)."""
    return sys.version_info[:2] == CLI_PYTHON


def generated() -> dict[Path, str]:
    """Every page that holds a copy, with the text it should have (the CLI reference on
    ``CLI_PYTHON`` only)."""
    pages: dict[Path, str] = {}
    cli = cli_page_checked()
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        wanted = with_examples(text)
        if path == CLI_PAGE and cli:
            wanted = with_cli_help(wanted)
        if EXAMPLE_MARK.search(text) or (path == CLI_PAGE and cli):
            pages[path] = wanted
    return pages


def stale() -> list[str]:
    """The pages (relative to the repository) whose copies differ from their sources."""
    return [
        path.relative_to(ROOT).as_posix()
        for path, wanted in generated().items()
        if path.read_text(encoding="utf-8") != wanted
    ]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the copies (or, with ``--check``, only name the stale pages)."""
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    check = options.parse_args(argv).check
    if not cli_page_checked():
        version = ".".join(map(str, CLI_PYTHON))
        print(
            f"docs/cli-reference.md left alone: it is written by Python {version}", file=sys.stderr
        )
    if check:
        names = stale()
        for name in names:
            print(f"{name} differs from its sources: run python docs/generate.py", file=sys.stderr)
        return 1 if names else 0
    for path, wanted in generated().items():
        if path.read_text(encoding="utf-8") != wanted:
            path.write_text(wanted, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT).as_posix()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
