"""The footer's facts, read from a session: where, which model, tokens, cost, context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ._layout import FooterInfo

if TYPE_CHECKING:
    from .._session.facade import AgentSession


def tilde(path: Path) -> str:
    """``path`` with the home directory written ``~``.

    Args:
        path: a path.
    """
    text, home = str(path), str(Path.home())
    return "~" + text[len(home) :] if text == home or text.startswith(home + os.sep) else text


def footer_of(session: AgentSession | None) -> FooterInfo:
    """The footer for ``session`` (none yet: just the place), read from its public state.

    Args:
        session: the session being chatted with, if any.
    """
    if session is None:
        return FooterInfo(place=tilde(Path.cwd()), model="")
    stats = session.stats()
    usage = stats.context_usage
    model = session.model
    return FooterInfo(
        place=tilde(Path.cwd()),
        model=model.id,
        session_name=session.session_name,
        thinking=session.thinking_level if model.reasoning else None,
        input_tokens=stats.tokens.input,
        output_tokens=stats.tokens.output,
        cost=stats.cost,
        context_percent=usage.percent if usage is not None else None,
        context_window=model.context_window,
        auto_compaction=session.auto_compaction_enabled,
    )


def live_footer(info: FooterInfo, session: AgentSession | None, queued: int) -> FooterInfo:
    """``info`` with what changes from frame to frame: the retry running, the queue.

    Args:
        info: the footer as ``footer_of`` last read it.
        session: the session being chatted with, if any.
        queued: how many messages wait in its queues.
    """
    retry = None
    if session is not None and session.is_retrying:
        retry = f"retry {session.retry_attempt}"
    if retry != info.retry or queued != info.queued:
        info = attrs.evolve(info, retry=retry, queued=queued)
    return info
