"""Text for the terminal: display widths, word wrap, Markdown replies (pure, no I/O).

Widths are display cells as a terminal draws them, measured by ``wcwidth``: a CJK
character or an emoji takes two cells, a combining mark none, an ANSI SGR sequence
none. Every function here returns lines no wider than the width it was given.

- ``wrap`` word-wraps plain text; ``render_user`` and ``render_note`` build on it.
- ``fit`` cuts an already-styled line to a width, keeping its styles.
- ``MarkdownRenderer`` turns a reply's Markdown into styled lines through rich, and
  is cheap to call again and again while the reply streams in: the text is split into
  chunks (``split_chunks``: at blank lines, around code blocks, between list items,
  long code blocks in pieces), and only the last (growing) chunk is rendered again.
  Rendered apart, chunks differ from a whole-text render in small ways: a reference
  link defined in another chunk stays literal text; a string spanning two pieces of a
  long code block is highlighted per piece. A numbered list's items are numbered and
  their number column sized as in the whole list (``number_items``), so a list that
  reaches 10 does not draw its first items a column narrower.

Text from the outside world (the user, the model, a provider's error) never reaches
the terminal with its control characters: ESC, CR, BEL and the like are shown as
their Unicode control pictures (``␛``, ``␍``, ``␇``), C1 controls as ``�``; tabs
become spaces. So a reply cannot move the cursor or restyle the screen.

rich (with markdown-it and pygments) is imported on the first Markdown render only,
so a CLI that never draws a reply does not pay for it.
"""

from __future__ import annotations

import functools
import io
import itertools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

import attrs
import wcwidth

from .._core.classes import define, frozen

if TYPE_CHECKING:
    from rich.color import ColorSystem
    from rich.console import Console, JustifyMethod
    from rich.markdown import Markdown, MarkdownElement
    from rich.segment import Segment

RESET = "\x1b[0m"
USER_LABEL = "you: "
NOTE_INDENT = 4
TAB_SIZE = 8
CODE_THEME = "monokai"
CODE_PIECE = 16  # lines of a long code block rendered (and cached) together

_NOTE_COLORS = {"✗": "31", "↻": "33", "✓": "32"}  # red, yellow, green; others dim
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# CSI (SGR and the like) and OSC (hyperlinks) sequences: kept by ``fit``, zero cells.
_SEQUENCE = re.compile(r"(\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\))")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_LIST_ITEM = re.compile(r"(?:([-*+])|[0-9]{1,9}([.)]))(?: |$)")
_NUMBERED = re.compile(r"([0-9]{1,9})([.)])(?= |\n|$)")


def display_width(text: str) -> int:
    """The cells ``text`` takes on a terminal; escape sequences (SGR styles) take none.

    Sequences are removed before measuring: measured in place, one that follows a
    zero-width joiner would count as text joined to it.
    """
    return int(wcwidth.width(wcwidth.strip_sequences(text)))


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    return "\ufffd"  # C1 controls


def _sanitize(text: str) -> str:
    """``text`` with ``\\r\\n`` as ``\\n`` and every other control but tab and newline visible."""
    return _CONTROLS.sub(_visible, text.replace("\r\n", "\n"))


def _check_width(width: int) -> None:
    if width < 2:
        msg = f"width must be at least 2 cells, not {width!r}"
        raise ValueError(msg)


def _break_word(word: list[tuple[str, int]], room: int, width: int) -> Iterator[str]:
    """Pieces of a word too long for its line: the first fills ``room``, the rest ``width``.

    Breaks fall between graphemes, so a wide character never straddles two rows.
    """
    piece: list[str] = []
    used = 0
    for grapheme, cells in word:
        if used + cells > room and piece:
            yield "".join(piece)
            piece, used, room = [], 0, width
        elif used + cells > room:  # nothing fits in what is left of this row
            yield ""
            room = width
        piece.append(grapheme)
        used += cells
    yield "".join(piece)


def _wrap_line(line: str, first: int, rest: int) -> list[str]:
    """Word-wrap one line (no newline): ``first`` cells on its first row, ``rest`` after.

    A run of spaces where the line breaks is dropped; every other space is kept, the
    line's own indentation too.
    """
    rows: list[str] = []
    row = ""
    row_width = 0
    limit = first
    # Tokens: runs of plain spaces, and words (runs of other graphemes, with their widths).
    tokens: list[tuple[bool, list[tuple[str, int]]]] = []
    for grapheme in wcwidth.iter_graphemes(line):
        is_space = grapheme == " "
        if not tokens or tokens[-1][0] != is_space:
            tokens.append((is_space, []))
        tokens[-1][1].append((grapheme, display_width(grapheme)))
    spaces = ""
    for is_space, graphemes in tokens:
        if is_space:
            spaces = "".join(g for g, _ in graphemes)
            continue
        word_width = sum(cells for _, cells in graphemes)
        if row_width + len(spaces) + word_width <= limit:
            row += spaces + "".join(g for g, _ in graphemes)
            row_width += len(spaces) + word_width
        elif row and word_width <= rest:  # break before the word
            rows.append(row)
            limit = rest
            row, row_width = "".join(g for g, _ in graphemes), word_width
        else:  # a word longer than a row: break it where it stands
            if not row and len(spaces) < limit:  # keep the indentation if anything fits
                row, row_width = spaces, len(spaces)
            elif row:
                row += spaces if row_width + len(spaces) < limit else ""
                row_width = display_width(row)
            *done, last = _break_word(graphemes, limit - row_width, rest)
            if done:
                rows.append(row + done[0])
                rows.extend(done[1:])
                limit = rest
                row = last
            else:
                row += last
            row_width = display_width(row)
        spaces = ""
    if spaces:  # trailing spaces: kept as far as they fit
        row += spaces[: max(0, limit - row_width)]
    rows.append(row)
    return rows


def wrap(text: str, width: int) -> list[str]:
    """Word-wrap plain ``text`` at ``width`` cells.

    Lines are split at ``\\n`` (empty lines kept) and each is wrapped at spaces; a word
    longer than ``width`` is broken between graphemes, and a wide character never
    straddles two rows. Nothing is dropped but the spaces where a line breaks (and
    trailing spaces past the width). Control characters are made visible, tabs expanded.

    Raises:
        ValueError: ``width`` is below 2 (a wide character needs two cells).
    """
    _check_width(width)
    rows: list[str] = []
    for line in _sanitize(text).split("\n"):
        rows.extend(_wrap_line(line.expandtabs(TAB_SIZE), width, width))
    return rows


def fit(line: str, width: int) -> str:
    """``line`` (which may carry SGR styles) cut to ``width`` cells.

    A line that fits is returned unchanged. A cut one keeps its escape sequences up to
    the cut, loses the wide character that would straddle the edge, and ends with a
    reset (``\x1b[0m``) if it has any styles, so that they do not leak.
    """
    if display_width(line) <= width:
        return line
    parts = _SEQUENCE.split(line)  # text, sequence, text, …, text
    # Graphemes are found in the text without its sequences, as ``display_width`` sees
    # it: a character and what joins it (a variation selector, a combining mark, a
    # zero-width joiner) stay one grapheme when a style change falls between them.
    graphemes = list(wcwidth.iter_graphemes("".join(parts[0::2])))
    keep = len(graphemes)
    used = sum(display_width(g) for g in graphemes)
    while keep and used > width:
        keep -= 1
        used -= display_width(graphemes[keep])
    out = _cut(parts, graphemes, keep)
    while keep and display_width(out) > width:  # one by one, graphemes may measure less
        keep -= 1
        out = _cut(parts, graphemes, keep)
    return out + RESET if _SEQUENCE.search(out) else out


def _cut(parts: list[str], graphemes: list[str], keep: int) -> str:
    """The styled line of ``parts`` with only its first ``keep`` graphemes of text, and
    the sequences that come before the cut."""
    chars = sum(len(g) for g in graphemes[:keep])
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:  # a sequence
            out.append(part)
        elif len(part) <= chars:
            out.append(part)
            chars -= len(part)
        else:
            out.append(part[:chars])
            break
    return "".join(out)


@frozen
class Style:
    """How lines are styled: ``color=False`` means no SGR sequence at all.

    Use it for ``NO_COLOR``, a dumb terminal, or output that is not a terminal.
    """

    color: bool = True


def _paint(line: str, sgr: str, style: Style) -> str:
    return f"\x1b[{sgr}m{line}{RESET}" if style.color and line else line


def render_user(text: str, width: int, *, style: Style = Style()) -> list[str]:
    """A user message: ``you: `` and the text, continuation rows indented to match.

    Multi-line text keeps its lines. Below 7 cells the indentation is given up.
    """
    _check_width(width)
    if width - len(USER_LABEL) < 2:
        return wrap(USER_LABEL + text, width)
    label = _paint(USER_LABEL.rstrip(), "1;36", style) + " "
    rows = wrap(text, width - len(USER_LABEL))
    indent = " " * len(USER_LABEL)
    return [label + rows[0], *(indent + row if row else row for row in rows[1:])]


def render_note(text: str, width: int, *, style: Style = Style()) -> list[str]:
    """A status note (``"  ✗ 503 …"``, ``"  ↻ retry 1/3 in 2s"``) with a hanging indent.

    Its first row takes the whole width, every later row is indented 4 spaces. In
    colour, ``✗`` notes are red, ``↻`` yellow, ``✓`` green, others dim.
    """
    _check_width(width)
    indent = NOTE_INDENT if width - NOTE_INDENT >= 2 else 0
    lines = _sanitize(text).split("\n")
    rows = _wrap_line(lines[0].expandtabs(TAB_SIZE), width, width - indent)
    for line in lines[1:]:
        rows.extend(_wrap_line(line.expandtabs(TAB_SIZE), width - indent, width - indent))
    rows = [rows[0], *(" " * indent + row if row else row for row in rows[1:])]
    mark = text.lstrip()[:1]
    sgr = _NOTE_COLORS.get(mark, "2")
    return [_paint(row, sgr, style) for row in rows]


# -- Markdown ---------------------------------------------------------------------------


def _fence_closes(line: str, fence: str) -> bool:
    stripped = line.lstrip(" ")
    return (
        len(line) - len(stripped) <= 3
        and stripped.startswith(fence)
        and not stripped.rstrip().lstrip(fence[0])
    )


@frozen
class Chunk:
    """A piece of a reply's Markdown that is rendered on its own (and cached).

    ``tight``: joined to the previous chunk with no empty line between (the next item
    of a list, the next piece of a long code block); otherwise with one. ``trim_top``
    and ``trim_bottom``: a piece of a long code block without the padding row that the
    code block has above (or below) it. ``pad``: columns to indent the chunk by, so an
    item of a numbered list lines up with the list's widest number.
    """

    text: str
    tight: bool = False
    trim_top: bool = False
    trim_bottom: bool = False
    pad: int = 0


def _cut_code(lines: list[str], fence: str, closed: bool, tight: bool) -> list[Chunk]:
    """A fenced code block as pieces of about ``CODE_PIECE`` lines, each a fenced block.

    Cuts fall only between two non-blank lines (rich strips a code block's trailing
    blank lines). Each piece but the last gets a closing fence; the last keeps the real
    one, or none while the block is still streaming in.
    """
    body = lines[1:-1] if closed else lines[1:]
    cuts = [0]
    index = CODE_PIECE
    while index < len(body):
        if body[index - 1].strip() and body[index].strip():
            cuts.append(index)
            index += CODE_PIECE
        else:
            index += 1
    if len(cuts) == 1:
        return [Chunk("\n".join(lines), tight)]
    cuts.append(len(body))
    pieces: list[Chunk] = []
    for number, (begin, end) in enumerate(itertools.pairwise(cuts)):
        first, last = number == 0, end == len(body)
        closer = ([lines[-1]] if closed else []) if last else [fence]
        text = "\n".join([lines[0], *body[begin:end], *closer])
        pieces.append(Chunk(text, tight or not first, trim_top=not first, trim_bottom=not last))
    return pieces


def split_chunks(text: str) -> list[Chunk]:
    """The top-level chunks of Markdown ``text``, each rendered on its own.

    A chunk ends:

    - at blank lines before a line that starts at column 0 (an indented line continues
      a list item or an indented code block); the blank lines go;
    - before and after a fenced code block whose fence starts at column 0; a long code
      block is cut further into pieces of about ``CODE_PIECE`` lines (tight);
    - before the next item of a list, at column 0 and of the same kind (tight).

    Nothing splits inside a fenced code block; an unclosed one runs to the end.
    """
    chunks: list[Chunk] = []
    current: list[str] = []
    tight = False
    blanks = 0
    fence: str | None = None
    code_chunk = False  # the current chunk is a fenced code block from column 0
    item: str | None = None  # the kind of list item the current chunk's last top line is

    def flush(closed: bool = True) -> None:
        if current and code_chunk:
            chunks.extend(_cut_code(current, _fence_of(current[0]), closed, tight))
        elif current:
            chunks.append(Chunk("\n".join(current), tight))

    for line in text.split("\n"):
        if fence is not None:
            current.extend([""] * blanks)
            blanks = 0
            current.append(line)
            if _fence_closes(line, fence):
                fence = None
                if code_chunk:
                    flush()
                    current, tight, code_chunk, item = [], False, False, None
            continue
        if not line.strip():
            blanks += 1 if current else 0
            continue
        top = not line[0].isspace()
        opening = _fence_opening(line)
        kind = _item_kind(line) if top else None
        if current and top and (blanks or opening is not None or (kind and kind == item)):
            flush()
            tight = not blanks and opening is None
            current, blanks, code_chunk = [], 0, False
        current.extend([""] * blanks)
        blanks = 0
        if top:
            item = kind
        if opening is not None:
            fence = opening
            code_chunk = not current and top
        current.append(line)
    flush(closed=fence is None)
    return number_items(chunks)


def number_items(chunks: list[Chunk]) -> list[Chunk]:
    """The chunks with each numbered list's items numbered and padded as in one render.

    rich numbers a list from its first item's number and sizes the number column by
    the list's end; an item rendered alone would get its own number and a column sized
    for it. So each item after the first gets the number it has in its list, and a
    ``pad`` that makes up for the narrower column. Items of one list are chunks in a
    row that start with a number and the same delimiter (``.`` or ``)``).
    """
    out = list(chunks)
    run: list[int] = []
    delimiter = ""
    for index, chunk in enumerate([*chunks, None]):
        match = _NUMBERED.match(chunk.text) if chunk is not None else None
        if match is not None and run and match.group(2) == delimiter:
            run.append(index)
            continue
        if run:
            _number_run(out, run)
        run = [index] if match is not None else []
        delimiter = match.group(2) if match is not None else ""
    return out


def _number_run(chunks: list[Chunk], run: list[int]) -> None:
    first = _NUMBERED.match(chunks[run[0]].text)
    assert first is not None
    start = int(first.group(1))
    widest = len(str(start + len(run)))  # rich sizes the column for start + items
    for offset, index in enumerate(run):
        chunk = chunks[index]
        number = start + offset
        text = _NUMBERED.sub(f"{number}\\2", chunk.text, count=1)
        pad = widest - len(str(number + 1))  # alone, it is sized for number + 1
        chunks[index] = attrs.evolve(chunk, text=text, pad=pad)


def _fence_of(line: str) -> str:
    opening = _fence_opening(line)
    assert opening is not None
    return opening


def _fence_opening(line: str) -> str | None:
    r"""The fence (``\`\`\```, ``~~~``…) that ``line`` opens a code block with, if it does."""
    opening = _FENCE_OPEN.fullmatch(line)
    if opening is None or (opening.group(1)[0] == "`" and "`" in opening.group(2)):
        return None
    return opening.group(1)


def _item_kind(line: str) -> str | None:
    """``-``, ``*``, ``+`` for a bullet item, ``.`` or ``)`` for a numbered one, else None."""
    match = _LIST_ITEM.match(line)
    if match is None:
        return None
    return match.group(1) or match.group(2)


def _line_text(segments: list[Segment], style: Style, color_system: ColorSystem | None) -> str:
    """One rendered line as a string: SGR for styles (in colour), trailing blanks dropped.

    Trailing spaces with a background (a code block's) are kept in colour, so the block
    stays a block; all others are only padding, and copied text should not have them.
    """
    parts = [(segment.text, segment.style) for segment in segments if not segment.control]
    while parts:
        text, seg_style = parts[-1]
        if style.color and seg_style is not None and seg_style.bgcolor is not None:
            break
        stripped = text.rstrip(" ")
        if stripped:
            parts[-1] = (stripped, seg_style)
            break
        parts.pop()
    if not style.color:
        return "".join(text for text, _ in parts)
    out: list[str] = []
    for text, seg_style in parts:
        if seg_style is None or not text:
            out.append(text)
        else:
            out.append(seg_style.render(text, color_system=color_system))
    return "".join(out)


@define(eq=False)
class MarkdownRenderer:
    """Markdown replies as terminal lines, for a reply that grows while it streams.

    ``render`` may be called every few milliseconds with a longer text: the text is cut
    into chunks (``split_chunks``), each complete chunk's lines are cached by (chunk,
    width) — the style is the renderer's — and only the last chunk, the one still
    growing, is rendered again. Chunks are joined with one empty line, or none when
    ``tight``. The result is the same as a fresh renderer's: the cache cannot be seen.
    Only the chunks of the latest text are kept, for the latest width.
    """

    style: Style = Style()
    _cache: dict[tuple[Chunk, int], list[str]] = attrs.field(factory=dict, init=False)
    _consoles: dict[int, Console] = attrs.field(factory=dict, init=False)

    def render(self, text: str, width: int) -> list[str]:
        """The Markdown ``text`` as lines, each at most ``width`` cells.

        An unclosed code fence at the end shows as a code block in progress.

        Raises:
            ValueError: ``width`` is below 2.
        """
        _check_width(width)
        cache: dict[tuple[Chunk, int], list[str]] = {}
        chunks = split_chunks(_sanitize(text))
        lines: list[str] = []
        for index, chunk in enumerate(chunks):
            key = (chunk, width)
            rendered = self._cache.get(key)
            if rendered is None:
                rendered = self._render_chunk(chunk, width)
            if index < len(chunks) - 1:
                cache[key] = rendered  # the last chunk may still grow: not worth keeping
            if rendered:
                if lines and not chunk.tight:
                    lines.append("")
                lines.extend(rendered)
        self._cache = cache
        return lines

    def _console(self, width: int) -> Console:
        console = self._consoles.get(width)
        if console is None:
            from rich.console import Console

            color = self.style.color
            console = Console(
                width=width,
                force_terminal=color,
                force_jupyter=False,
                no_color=not color,
                color_system="256" if color else None,
                file=io.StringIO(),
                legacy_windows=False,
                highlight=False,
                emoji=False,
                markup=False,
                tab_size=TAB_SIZE,
            )
            self._consoles = {width: console}  # one terminal width at a time
        return console

    def _render_chunk(self, chunk: Chunk, width: int) -> list[str]:
        """One chunk through rich; blank rows at its ends dropped; every row fitted."""
        if chunk.pad and width - chunk.pad >= 2:
            indent = " " * chunk.pad
            inner = self._render_chunk(attrs.evolve(chunk, pad=0), width - chunk.pad)
            return [indent + line if line else line for line in inner]
        console = self._console(width)
        try:
            segment_lines = console.render_lines(
                _markdown_class()(chunk.text, code_theme=CODE_THEME, hyperlinks=False),
                console.options,
                pad=False,
                new_lines=False,
            )
        except Exception:  # rich failed on odd input: show the text rather than nothing
            lines = wrap(chunk.text, width)
        else:
            color_system = console._color_system  # what color_system="256" resolved to
            lines = [_line_text(segments, self.style, color_system) for segments in segment_lines]
            # A piece of a long code block: its padding row towards the next piece goes.
            lines = lines[1 if chunk.trim_top else 0 : -1 if chunk.trim_bottom else None]
        lines = [fit(line.replace("\t", " " * TAB_SIZE), width) for line in lines]
        while lines and not lines[-1]:
            lines.pop()
        start = 0
        while start < len(lines) and not lines[start]:
            start += 1
        return lines[start:]


@functools.cache
def _markdown_class() -> type[Markdown]:
    """rich's ``Markdown``, every heading left-aligned (a centred title looks lost in a chat)."""
    from rich.markdown import Heading, Markdown

    class LeftHeading(Heading):
        LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = dict.fromkeys(
            ("h1", "h2", "h3", "h4", "h5", "h6"), "left"
        )

    class ChatMarkdown(Markdown):
        elements: ClassVar[dict[str, type[MarkdownElement]]] = {
            **Markdown.elements,
            "heading_open": LeftHeading,
        }

    return ChatMarkdown
