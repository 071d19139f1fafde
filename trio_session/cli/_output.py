"""What ``trio-session`` prints as a session runs, and the offline demo."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import TextIO

import trio

from .._core.codec import event_to_json
from .._core.events import (
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    HistoryWriteFailed,
    MessageEnd,
    MessageUpdate,
    SessionEvent,
)
from .._core.messages import AssistantMessage, UserMessage
from .._session.facade import EventStream

#: A refused connection, as the HTTP providers word it (``providers._http``).
REFUSED = re.compile(r"Connection error: could not connect to (.+) \(Connection refused\)")


def wait_text(seconds: float) -> str:
    """A wait as the line mode says it: ``2s``, ``12s``; under a second ``0.2s``, ``0.01s``."""
    if seconds >= 1:
        return f"{round(seconds)}s"
    return f"{seconds:.2g}s" if seconds > 0 else "0s"


def refused_note(event: AutoRetryStart) -> str | None:
    """A first retry after a refused connection: say at once that nothing listens there.

    A refused connection is rarely transient (a local server not started, a wrong
    port), and the retries that follow take seconds; the user learns it before them.
    """
    found = REFUSED.fullmatch(event.error_message)
    if event.attempt != 1 or found is None:
        return None
    return f"nothing listens on {found.group(1)} (connection refused); retrying"


class Printer:
    """Human-readable event output for the line mode.

    Args:
        out: where the conversation and the retry story go.
        notes: where a note for the user goes (``refused_note``): stderr by default.
        story_only: print the retry story, not the messages (``chat -p``, on stderr).
    """

    def __init__(
        self, out: TextIO, *, notes: TextIO | None = None, story_only: bool = False
    ) -> None:
        self.out = out
        self.notes = notes if notes is not None else sys.stderr
        self.story_only = story_only
        self.tty = out.isatty()
        self.streaming = False

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def event(self, event: SessionEvent) -> None:
        if self.story_only and isinstance(event, MessageUpdate):
            return
        if self.story_only and isinstance(event, MessageEnd):
            if isinstance(event.message, AssistantMessage) and event.message.stop_reason == "error":
                self.write(f"  ✗ error: {event.message.error_message}\n")
            return
        if isinstance(event, MessageUpdate):
            if event.delta:  # the text deltas; other parts (tool calls) are not shown
                if not self.streaming:
                    self.write("assistant: ")
                    self.streaming = True
                self.write(event.delta)
        elif isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, UserMessage):
                self.write(f"you: {message.text}\n")
            elif isinstance(message, AssistantMessage):
                if self.streaming:
                    self.write("\n")
                    self.streaming = False
                if message.stop_reason == "error":
                    self.write(f"  ✗ error: {message.error_message}\n")
                elif message.stop_reason == "aborted":
                    self.write("  ✗ aborted\n")
        elif isinstance(event, AutoRetryStart):
            if (note := refused_note(event)) is not None:
                self.notes.write(f"trio-session: {note}\n")
                self.notes.flush()
            wait = wait_text(event.delay_ms / 1000)
            line = f"  ↻ retrying ({event.attempt}/{event.max_attempts}) in {wait}…"
            self.write(line if self.tty else line + "\n")
        elif isinstance(event, AutoRetryEnd):
            if self.tty:
                self.write("\n")
            if event.success:
                self.write(f"  ✓ retry succeeded on attempt {event.attempt}\n")
            else:
                self.write(
                    f"  ✗ retry failed after {event.attempt} attempts: {event.final_error}\n"
                )
        elif isinstance(event, CompactionStart):
            self.write(f"  ⇣ compacting the context ({event.reason})\n")
        elif isinstance(event, CompactionEnd):
            done = "done" if event.result is not None else "nothing to compact"
            self.write(f"  ⇣ compaction {'aborted' if event.aborted else done}\n")
        elif isinstance(event, HistoryWriteFailed):
            self.write(f"  ✗ not saved: {event.error}\n")

    def countdown(self, event: AutoRetryStart, remaining: float) -> None:
        if self.tty:
            wait = wait_text(remaining) if remaining < 1 else f"{math.ceil(remaining)}s"
            self.write(f"\r  ↻ retrying ({event.attempt}/{event.max_attempts}) in {wait}… \x1b[K")


async def show(events: EventStream, printer: Printer, as_json: bool) -> None:
    """Print events as they happen; count down the retry delay on a terminal."""
    async with trio.open_nursery() as nursery:
        countdown: trio.CancelScope | None = None
        async for event in events:
            if as_json:
                printer.write(json.dumps(event_to_json(event), ensure_ascii=False) + "\n")
                continue
            if countdown is not None:
                countdown.cancel()
                countdown = None
            printer.event(event)
            if isinstance(event, AutoRetryStart) and printer.tty:
                countdown = trio.CancelScope()
                nursery.start_soon(_countdown, printer, event, countdown)


async def _countdown(printer: Printer, event: AutoRetryStart, scope: trio.CancelScope) -> None:
    with scope:
        deadline = trio.current_time() + event.delay_ms / 1000
        while (remaining := deadline - trio.current_time()) > 0:
            printer.countdown(event, remaining)
            await trio.sleep(min(1.0, remaining - math.floor(remaining) or 1.0))


def is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()
