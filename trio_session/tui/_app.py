"""The interactive chat: an input line, streamed answers, a retry loader, Esc to cancel.

Everything here is glue between three parts that are tested on their own: the
session (events in, ``prompt``/``abort``/``abort_retry`` out), the
``trio_session.tui.EventController`` (events → loader, status, Esc binding),
and the terminal (``KeyReader``, ``Screen``).

Keys: Enter sends; Esc aborts the running prompt, or — while the retry loader shows —
cancels the retry; Ctrl+C aborts the running prompt, and a second Ctrl+C (or Ctrl+D on
an empty line) exits.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import TextIO

import attrs
import trio

from .._errors import SessionBusyError
from .._events import (
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    SessionEvent,
)
from .._messages import AssistantMessage, UserMessage
from .._session import AgentSession, EventStream
from ..store._history import HistoryError
from ._controller import EventController
from ._terminal import Key, KeyReader, Screen, raw_terminal

HINT = "enter: send · esc: abort · ctrl+c twice: exit"
TICK = 0.1


@attrs.define(eq=False)
class ChatApp:
    """One interactive chat on a session, in a terminal."""

    session: AgentSession
    screen: Screen
    keys: KeyReader
    clock: Callable[[], float] = trio.current_time
    input: str = ""
    _controller: EventController = attrs.field(init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _streaming: str | None = attrs.field(default=None, init=False)
    _ctrl_c_armed: bool = attrs.field(default=False, init=False)
    _note: str | None = attrs.field(default=None, init=False)
    _shown_status: str | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._controller = EventController(abort_retry=self.session.abort_retry, esc=self._abort)

    async def run(self, *, first_prompt: str | None = None, banner: str | None = None) -> None:
        """Run until the user exits (Ctrl+C twice, or Ctrl+D on an empty line)."""
        if banner:
            self.screen.print(*banner.splitlines(), "")
        try:
            with self.session.events() as events:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._show_events, events)
                    nursery.start_soon(self._tick)
                    if first_prompt:
                        self._send(first_prompt)
                    self.render()
                    await self._read_keys()
                    nursery.cancel_scope.cancel(reason="the user left the chat")
        finally:
            with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
                self.screen.close()

    # -- drawing -------------------------------------------------------------

    def render(self) -> None:
        """Redraw the live region: streaming line, status or loader, input."""
        now = self.clock()
        lines: list[str] = []
        if self._streaming:
            lines.append(self._streaming)
        loader = self._controller.loader_text(now)
        if self._ctrl_c_armed:
            lines.append("press Ctrl+C again to exit")
        elif loader is not None:
            lines.append(f"{self._controller.spinner(now)} {loader}")
        elif self._note is not None:
            lines.append(self._note)
        elif self.session.is_running:
            lines.append(f"{self._controller.spinner(now)} working… (esc to abort)")
        else:
            lines.append(HINT)
        prompt = f"> {self.input}"
        lines.append(prompt)
        self.screen.live(lines, cursor_col=len(prompt))

    async def _tick(self) -> None:
        while True:
            await trio.sleep(TICK)
            if self.session.is_running:
                self.render()

    # -- session events -------------------------------------------------------------

    async def _show_events(self, events: EventStream) -> None:
        async for event in events:
            self._on_event(event)
            self.render()

    def _on_event(self, event: SessionEvent) -> None:
        self._controller.handle(event, self.clock())
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            self._streaming = "assistant: "
        elif isinstance(event, MessageUpdate):
            self._stream(event.delta)
        elif isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, UserMessage):
                self._note = None
                self.screen.print(f"you: {message.text}")
            elif isinstance(message, AssistantMessage):
                if self._streaming and self._streaming != "assistant: ":
                    self.screen.print(self._streaming)
                self._streaming = None
                if message.stop_reason == "error":
                    self.screen.print(f"  ✗ {message.error_message}")
        elif isinstance(event, AutoRetryStart):
            seconds = round(event.delay_ms / 1000)
            self.screen.print(f"  ↻ retry {event.attempt}/{event.max_attempts} in {seconds}s")
        elif isinstance(event, AutoRetryEnd):
            if event.success:
                self.screen.print(f"  ✓ retry {event.attempt} succeeded")
        elif isinstance(event, CompactionStart):
            self.screen.print("  ⇣ the conversation is too long: compacting")
        elif isinstance(event, CompactionEnd) and event.result is not None:
            self.screen.print(f"  ⇣ {event.result.summary.splitlines()[0][:120]}")
        status = self._controller.status
        if status != self._shown_status:
            self._shown_status = status
            if status is not None:
                self._note = status
                self.screen.print(f"  ✗ {status}")

    def _stream(self, delta: str) -> None:
        text = (self._streaming or "assistant: ") + delta
        *done, rest = text.split("\n")
        width = self.screen.width - 1
        while len(rest) > width:
            done.append(rest[:width])
            rest = rest[width:]
        if done:
            self.screen.print(*done)
        self._streaming = rest

    # -- keys ---------------------------------------------------------------------------

    async def _read_keys(self) -> None:
        while True:
            try:
                key = await self.keys.read()
            except EOFError:
                return
            if self._on_key(key):
                return
            self.render()

    def _on_key(self, key: Key) -> bool:
        """Handle one key; True means exit."""
        if key.name == "ctrl_c":
            if self._ctrl_c_armed:
                return True
            self._ctrl_c_armed = True
            if self.session.is_running:
                self._abort()
            self.input = ""
            return False
        self._ctrl_c_armed = False
        if key.name == "ctrl_d" and not self.input:
            return True
        if key.name == "esc":
            self._controller.press_esc()
        elif key.name == "char":
            self.input += key.text
        elif key.name == "backspace":
            self.input = self.input[:-1]
        elif key.name == "ctrl_u":
            self.input = ""
        elif key.name == "enter":
            text = self.input.strip()
            if text and not self.session.is_running:
                self.input = ""
                self._send(text)
            elif text:
                self._note = "still working — esc to abort"
        return False

    def _send(self, text: str) -> None:
        assert self._nursery is not None
        self._note = None
        self._nursery.start_soon(self._prompt, text)

    async def _prompt(self, text: str) -> None:
        try:
            await self.session.prompt(text)
        except SessionBusyError:
            self._note = "still working — esc to abort"
        except HistoryError as exc:  # the chat cannot go on unsaved: say so, then leave
            self.screen.print(f"✗ not saved: {exc}")
            raise
        self.render()

    def _abort(self) -> None:
        if self.session.is_running and self._nursery is not None:
            self._nursery.start_soon(self.session.abort)


async def run_terminal_chat(
    session: AgentSession,
    *,
    first_prompt: str | None = None,
    banner: str | None = None,
    fd: int = 0,
    out: TextIO | None = None,
) -> None:
    """Run the chat on the terminal at ``fd`` (keys) and ``out`` (screen, stdout)."""
    with raw_terminal(fd):
        app = ChatApp(session, Screen(out or sys.stdout), KeyReader(fd))
        await app.run(first_prompt=first_prompt, banner=banner)
