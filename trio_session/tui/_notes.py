"""The transcript's one-line notes for session events: retries, compactions. Pure."""

from __future__ import annotations

from .._core.events import (
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    SessionEvent,
    SummarizationRetryScheduled,
)
from ._controller import js_round


def event_note(event: SessionEvent) -> str | None:
    """The note ``event`` adds to the transcript (``"  ↻ retry 1/3 in 2s"``), if any."""
    if isinstance(event, AutoRetryStart):
        seconds = max(1, js_round(event.delay_ms / 1000))
        return f"  ↻ retry {event.attempt}/{event.max_attempts} in {seconds}s"
    if isinstance(event, AutoRetryEnd):
        return f"  ✓ retry {event.attempt} succeeded" if event.success else None
    if isinstance(event, SummarizationRetryScheduled):  # R-56f: as a retry is shown
        seconds = max(1, js_round(event.delay_ms / 1000))
        return (
            f"  ↻ summary retry {event.attempt}/{event.max_attempts} in {seconds}s: "
            f"{event.error_message}"
        )
    if isinstance(event, CompactionStart):
        return "  ⇣ compacting the conversation"
    if isinstance(event, CompactionEnd):
        if event.result is not None:
            first = event.result.summary.strip().splitlines()[:1]
            return f"  ⇣ compacted: {first[0][:200] if first else ''}"
        if event.error_message:
            return f"  ✗ compaction failed: {event.error_message}"
    return None
