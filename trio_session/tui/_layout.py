"""The live region: the reply being streamed, queued messages, the status line, the
editor between two rules, and the footer — fitted to the terminal. Pure.

``compose`` gets every part already rendered for the width and decides what fits
the height: the footer and the editor first (the editor may grow to half the
screen, scrolling inside itself beyond that), then as much of the reply's tail as
fits. The reply lines that do not fit are returned so the app can move them into
the scrollback: a long reply streams up the screen, nothing of it is lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core.classes import frozen
from ._render import Style, display_width, fit
from ._transcript import styled

#: Below this many rows the rules and the footer are left out.
SMALL_HEIGHT = 10
#: At most this many queued messages are listed above the status line.
QUEUE_ROWS = 3


def format_tokens(count: int) -> str:
    """``950``, ``1.2k``, ``45k``, ``1.3M``, ``12M`` (as the reference's footer)."""
    if count < 1000:
        return str(count)
    if count < 10_000:
        return f"{count / 1000:.1f}k"
    if count < 1_000_000:
        return f"{round(count / 1000)}k"
    if count < 10_000_000:
        return f"{count / 1_000_000:.1f}M"
    return f"{round(count / 1_000_000)}M"


@frozen
class FooterInfo:
    """What the footer says; the app fills it from the session."""

    place: str  # the working directory, ``~`` for home
    model: str
    session_name: str | None = None
    thinking: str | None = None  # the thinking level, for reasoning models
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    context_percent: float | None = None
    context_window: int = 0
    auto_compaction: bool = True
    retry: str | None = None  # "retry 2/3" while a retry chain runs
    queued: int = 0


def footer_lines(info: FooterInfo, width: int, style: Style) -> list[str]:
    """Two lines: where and which session; then tokens, cost, context use — model."""
    top = info.place + (f" • {info.session_name}" if info.session_name else "")
    stats: list[str] = []
    if info.input_tokens:
        stats.append(f"↑{format_tokens(info.input_tokens)}")
    if info.output_tokens:
        stats.append(f"↓{format_tokens(info.output_tokens)}")
    if info.cost:
        stats.append(f"${info.cost:.3f}")
    percent = "?" if info.context_percent is None else f"{info.context_percent:.1f}%"
    auto = " (auto)" if info.auto_compaction else ""
    stats.append(f"{percent}/{format_tokens(info.context_window)}{auto}")
    if info.retry:
        stats.append(f"↻ {info.retry}")
    if info.queued:
        stats.append(f"⋯ {info.queued} queued")
    left = " ".join(stats)
    right = info.model + (f" • {info.thinking}" if info.thinking else "")
    gap = width - display_width(left) - display_width(right)
    bottom = left + " " * gap + right if gap >= 2 else left
    return [fit(styled(top, "2", style), width), fit(styled(bottom, "2", style), width)]


@frozen
class Frame:
    """The live region: its lines and where the cursor goes (row, column)."""

    lines: tuple[str, ...]
    cursor: tuple[int, int]
    overflow: int = 0  # reply lines from the top that did not fit (to the scrollback)


def editor_rows(height: int, fixed: int) -> int:
    """How many rows the editor may take: up to half the screen, at least one."""
    return max(1, min(height - fixed - 1, max(3, height // 2)))


def fixed_rows(height: int, queued: int) -> int:
    """Rows of the live region that are not the reply or the editor."""
    queue = min(queued, QUEUE_ROWS)
    return 1 + queue + (0 if height < SMALL_HEIGHT else 4)  # status, queue, 2 rules + footer


def compose(
    *,
    width: int,
    height: int,
    reply: Sequence[str],
    queue: Sequence[str],
    status: str,
    editor: Sequence[str],
    editor_cursor: tuple[int, int],
    footer: Sequence[str],
    style: Style,
    menu: Sequence[str] = (),
) -> Frame:
    """Fit the parts into ``height`` rows; see the module docstring. ``menu`` (the ``/``
    completions) goes between the status line and the editor."""
    small = height < SMALL_HEIGHT
    rule = styled("─" * width, "2", style)
    queue_lines = [fit(line, width) for line in queue[:QUEUE_ROWS]]
    if len(queue) > QUEUE_ROWS:
        queue_lines[-1] = fit(f"  ⋯ and {len(queue) - QUEUE_ROWS + 1} more queued", width)
    bottom: list[str] = [status, *menu]
    if not small:
        bottom.append(rule)
    editor_top = len(bottom)
    bottom += editor
    if not small:
        bottom += [rule, *footer]
    # Every row fits: a row the terminal wrapped would shift the region under our feet.
    bottom = [fit(line, width) for line in bottom]
    room = max(height - len(queue_lines) - len(bottom), 0)
    shown = [fit(line, width) for line in reply[len(reply) - room :]] if room else []
    overflow = len(reply) - len(shown)
    lines = [*shown, *queue_lines, *bottom]
    row, col = editor_cursor
    cursor = (len(shown) + len(queue_lines) + editor_top + row, col)
    return Frame(tuple(lines), cursor, overflow)
