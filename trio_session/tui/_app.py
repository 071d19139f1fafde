"""The interactive chat: a multi-line editor, Markdown replies, a footer, a retry loader.

Everything here is glue between parts that are tested on their own: the session (events in;
``prompt``, ``steer``, ``abort``, ``abort_retry`` out), the ``EventController`` (events →
loader, status, Esc binding), the ``Editor`` and ``KeyDecoder`` (keys → text), the renderers
and ``compose`` (text → lines that fit), and the terminal (``KeyReader``, ``Screen``). One
Trio nursery holds it all: the key reader, the event reader, a frame task that redraws at
most ``FRAMES_PER_SECOND`` times a second, a SIGWINCH watcher, and the prompt tasks.

Keys (all in ``_help.KEYS``): Enter sends (a steer while the agent works); Esc aborts,
or cancels a waiting retry; Ctrl+C aborts, else clears the editor; twice, it exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, AsyncExitStack
from pathlib import Path
from typing import Any

import attrs
import trio

from .._core.classes import define, frozen
from .._core.errors import SessionBusyError, TrioSessionError
from .._core.events import (
    AgentEnd,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    SessionEvent,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from .._core.messages import AssistantMessage, CustomMessage, ToolResultMessage, UserMessage
from .._pi.prompt_input import PromptInput, PromptRefused
from .._session.facade import AgentSession, EventStream
from ..providers._base import Model
from ..store._entries import HistoryError
from ._complete import command_matches, complete, menu_lines, the_command
from ._controller import EventController
from ._editor import Editor
from ._external import EditorError, edit_text, editor_command
from ._footer import footer_of, live_footer, tilde
from ._help import COMMANDS, HINT
from ._input_history import InputHistory
from ._keys import Key
from ._layout import FooterInfo, Frame, compose, editor_rows, fixed_rows, footer_lines
from ._notes import event_note
from ._picker import Picker
from ._render import Style
from ._resume import resume_picker
from ._terminal import KeyReader, Screen
from ._tool_view import RunningTool
from ._transcript import ReplyView, Transcript, custom_note

FRAMES_PER_SECOND = 60
TICK = 0.1

#: Opens a session: ``None`` for a new one, else the session file to resume.
SessionOpener = Callable[[Path | None], AbstractAsyncContextManager[AgentSession]]
#: The banner: a text, or made from the session shown (so it names its model).
Banner = str | Callable[[AgentSession], str]


@frozen
class _Switch:
    """The user asked for another session: a new one (``path`` None) or that file."""

    path: Path | None


@define(eq=False)
class ChatApp:
    """One interactive chat, in a terminal (``screen`` and ``keys`` are injected).

    Args:
        screen: where lines go.
        keys: where keys come from.
        history: the input history (Up/Down), persisted per user by the CLI.
        opener: opens sessions for ``/new`` and ``/resume`` (the demo has none).
        sessions_dir: where ``/resume`` looks for this directory's sessions.
        style: colours or not.
        prompt_input: what a sent line goes through first: pi's templates and skills
            expanded, a prompt without a key refused (``trio_session._pi.prompt_input``).
        clock: the time, for the loader's countdown.
        suspend: gives the terminal back (cooked mode) while an external editor runs.
    """

    screen: Screen
    keys: KeyReader
    history: InputHistory = attrs.field(factory=InputHistory)
    opener: SessionOpener | None = None
    sessions_dir: Path | None = None
    style: Style = attrs.field(factory=Style)
    prompt_input: PromptInput = attrs.field(factory=PromptInput)
    clock: Callable[[], float] = trio.current_time
    suspend: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
    editor: Editor = attrs.field(init=False)
    transcript: Transcript = attrs.field(init=False)
    _session: AgentSession | None = attrs.field(default=None, init=False)
    _controller: EventController = attrs.field(init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _prompts: trio.Nursery | None = attrs.field(default=None, init=False)
    _fatal: HistoryError | None = attrs.field(default=None, init=False)
    _reply: ReplyView | None = attrs.field(default=None, init=False)
    # The latest update of the streaming reply, made into its message when a frame is
    # drawn (at most 60 times a second), not once per chunk.
    _streamed: MessageUpdate | None = attrs.field(default=None, init=False)
    _reply_committed: int = attrs.field(default=0, init=False)
    #: The tool that runs now, shown with its output so far below the reply.
    _running: RunningTool | None = attrs.field(default=None, init=False)
    _picker: Picker[Any] | None = attrs.field(default=None, init=False)
    _ctrl_c_armed: bool = attrs.field(default=False, init=False)
    _note: str | None = attrs.field(default=None, init=False)
    _shown_status: str | None = attrs.field(default=None, init=False)
    _footer: FooterInfo | None = attrs.field(default=None, init=False)
    _size: tuple[int, int] | None = attrs.field(default=None, init=False)
    _dirty: trio.Event = attrs.field(factory=trio.Event, init=False)
    _switch: _Switch | None = attrs.field(default=None, init=False)
    _banner: Banner | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.editor = Editor(history=self.history)
        self.transcript = Transcript(style=self.style)
        self._controller = self._new_controller()

    def _new_controller(self) -> EventController:
        return EventController(abort_retry=self._abort_retry, esc=self._abort)

    @property
    def session(self) -> AgentSession:
        """The session being chatted with now (it changes on ``/new`` and ``/resume``)."""
        assert self._session is not None
        return self._session

    # -- the run ---------------------------------------------------------------------------

    async def run(
        self,
        session: AgentSession | None = None,
        *,
        resume: Path | None = None,
        first_prompt: str | None = None,
        banner: Banner | None = None,
        pick_session: bool = False,
    ) -> None:
        """Run until the user leaves (``/quit``, Ctrl+C twice, Ctrl+D on an empty editor).

        Chat with ``session``, or with what ``opener`` opens for ``resume`` (a new session
        when ``None``), its conversation shown first; ``pick_session`` opens the ``/resume``
        picker at once (pi's ``--resume``). A ``banner`` made from a session is made for
        each one shown. The live region is erased on the way out; the transcript stays.
        """
        if self.history.warning:
            self.transcript.note(f"  ! {self.history.warning}")
        self._banner = banner
        if isinstance(banner, str) and banner:
            self.transcript.add("banner", banner)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._frames)
                nursery.start_soon(self._watch_resize)
                nursery.start_soon(self._tick)
                await self._serve(session, resume, first_prompt, pick_session)
                nursery.cancel_scope.cancel(reason="the user left the chat")
        finally:
            with contextlib.suppress(OSError, ValueError):  # after SIGHUP: no terminal
                self._draw()
                self.screen.close()
        if self._fatal is not None:
            raise self._fatal

    async def _serve(
        self, session: AgentSession | None, resume: Path | None, first: str | None, pick: bool
    ) -> None:
        """Chat with one session after another until the user leaves."""
        async with AsyncExitStack() as owned:
            if session is None:
                assert self.opener is not None, "run() needs a session or an opener"
                session = await owned.enter_async_context(self.opener(resume))
            self._show_session(session)
            while True:
                await self._chat(session, first, pick)
                first, pick = None, False
                switch, self._switch = self._switch, None
                if switch is None:
                    return
                assert self.opener is not None
                fresh = AsyncExitStack()
                try:
                    session = await fresh.enter_async_context(self.opener(switch.path))
                except (TrioSessionError, OSError) as exc:
                    await fresh.aclose()
                    self._say(f"  ✗ cannot open that session: {exc}")
                    continue
                await owned.aclose()  # the session we leave
                owned.push_async_exit(fresh)
                self._show_session(session)

    def _show_session(self, session: AgentSession) -> None:
        """Make ``session`` the current one and show its conversation so far."""
        self._session = session
        self._controller = self._new_controller()
        self._reply = None
        self._streamed = None
        self._shown_status = None
        self._note = None
        banner = [b for b in self.transcript.blocks if b.kind == "banner"][:1]
        self.transcript.clear()
        if callable(self._banner):
            self.transcript.add("banner", self._banner(session))
        else:
            self.transcript.blocks += banner
        if session.session_file is not None:
            self.transcript.note(f"  session file: {tilde(session.session_file)}")
        file = session.history_file
        for warning in file.loaded.warnings if file is not None and file.loaded else ():
            self.transcript.note(f"  ! warning: {warning}")
        self.transcript.add_messages(session.messages)
        self._update_footer()
        self._size = None  # a full redraw: the screen shows this session only
        self.render()

    async def _chat(self, session: AgentSession, first_prompt: str | None, pick: bool) -> None:
        """Serve ``session`` until the user leaves or asks for another session."""
        with session.events() as events:
            async with trio.open_nursery() as nursery:
                self._prompts = nursery
                nursery.start_soon(self._show_events, events)
                if pick:
                    nursery.start_soon(self._pick_session)
                if first_prompt:
                    self._send(first_prompt)
                await self._read_keys()
                if session.is_running:
                    await session.abort()
                nursery.cancel_scope.cancel(reason="the chat moves on")

    # -- drawing ---------------------------------------------------------------------------

    def render(self) -> None:
        """Ask for a redraw (the frame task draws at most 60 times a second)."""
        self._dirty.set()

    async def _frames(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty = trio.Event()
            self._draw()
            await trio.sleep(1 / FRAMES_PER_SECOND)

    async def _watch_resize(self) -> None:
        with trio.open_signal_receiver(signal.SIGWINCH) as signals:
            async for _ in signals:
                self.render()

    async def _tick(self) -> None:
        while True:
            await trio.sleep(TICK)
            session = self._session
            if session is not None and (session.is_running or self._controller.retrying):
                self.render()

    def _draw(self) -> None:
        """Draw a frame: new transcript lines into the scrollback, then the live region."""
        width, height = self.screen.width, self.screen.height
        full = self._size != (width, height)
        self._size = (width, height)
        if full:
            self._reply_committed = 0
            lines = self.transcript.all_lines(width)
        else:
            lines = self.transcript.unprinted(width)
        reply = self._reply_lines(width)
        running = None if reply else self._running
        if running is not None:  # a tool runs: the view's tail shows, none of it is committed
            reply = running.render(
                width, self.clock(), expanded=self.transcript.expanded, style=self.style
            )
        frame = self._frame(width, height, reply)
        if frame.overflow and running is None:  # the reply's head goes to the scrollback
            lines += reply[: frame.overflow]
            self._reply_committed += frame.overflow
        if full:
            self.screen.redraw_all(lines, frame.lines, frame.cursor)
        elif lines:
            self.screen.print(lines, frame.lines, frame.cursor)
        else:
            self.screen.live(frame.lines, frame.cursor)

    def _reply_lines(self, width: int) -> list[str]:
        """The streaming reply's lines not yet in the scrollback."""
        if self._reply is None:
            return []
        if self._streamed is not None:
            self._reply.message = self._streamed.message
            self._streamed = None
        return self._reply.render(width)[self._reply_committed :]

    def _frame(self, width: int, height: int, reply: list[str]) -> Frame:
        queue = [f"  ⋯ steer: {' '.join(t.split())}" for t in self._queued()]
        matches = command_matches(self.editor.text, COMMANDS) if self._picker is None else []
        menu = menu_lines(matches, width, self.style)
        menu = menu if height >= len(menu) + 10 else []  # else the editor needs the rows
        fixed = fixed_rows(height, len(queue)) + len(menu)
        rows = editor_rows(height, fixed)
        if self._picker is not None:
            editor, cursor = self._picker.render(width, rows, self.style)
        else:
            layout = self.editor.layout(width, max_rows=rows)
            editor, cursor = list(layout.lines), (layout.cursor_row, layout.cursor_col)
        footer = footer_lines(self._footer_info(), width, self.style)
        return compose(
            width=width,
            height=height,
            reply=reply,
            queue=queue,
            status=self._status_line(),
            editor=editor,
            editor_cursor=cursor,
            footer=footer,
            style=self.style,
            menu=menu,
        )

    def _queued(self) -> tuple[str, ...]:
        session = self._session
        return () if session is None else session.steering_messages + session.follow_up_messages

    def _status_line(self) -> str:
        now = self.clock()
        loader = self._controller.loader_text(now)
        session = self._session
        if self._ctrl_c_armed:
            return "press Ctrl+C again to exit"
        if loader is not None:
            return f"{self._controller.spinner(now)} {loader}"
        if self._note is not None:
            return self._note
        if session is not None and session.is_running:
            return f"{self._controller.spinner(now)} working… (esc to abort)"
        return HINT

    def _footer_info(self) -> FooterInfo:
        info = self._footer or self._update_footer()
        return live_footer(info, self._session, len(self._queued()))

    def _update_footer(self) -> FooterInfo:
        """Read tokens, cost and context use from the session (not on every delta)."""
        self._footer = info = footer_of(self._session)
        return info

    def _say(self, text: str) -> None:
        """Add a note to the transcript and redraw."""
        self.transcript.note(text)
        self.render()

    # -- session events --------------------------------------------------------------------

    async def _show_events(self, events: EventStream) -> None:
        async for event in events:
            self._on_event(event)
            self.render()

    def _on_event(self, event: SessionEvent) -> None:
        self._controller.handle(event, self.clock())
        if isinstance(event, ToolExecutionStart):
            self._running = RunningTool(event.tool_name, event.args, self.clock())
        elif isinstance(event, ToolExecutionUpdate) and self._running is not None:
            self._running.output = event.partial_result.text
        elif isinstance(event, ToolExecutionEnd | AgentEnd):
            self._running = None
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            self._reply = ReplyView(event.message, style=self.style)
            self._streamed = None
            self._reply_committed = 0
            return
        if isinstance(event, MessageUpdate):
            if self._reply is None:  # an update without its start: show it all the same
                self._reply = ReplyView(event.message, style=self.style)
            self._streamed = event
            return
        if isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, UserMessage):
                self._note = None
                self.transcript.add("user", message.text)
            elif isinstance(message, AssistantMessage):
                self._finish_reply(message)
            elif isinstance(message, ToolResultMessage):
                self.transcript.add("tool", result=message)
            elif isinstance(message, CustomMessage) and message.display:
                self.transcript.note(custom_note(message))
        elif (note := event_note(event)) is not None:
            self.transcript.note(note)
        status = self._controller.status
        if status != self._shown_status:
            self._shown_status = status
            if status is not None:  # once, in the transcript (not also on the status line)
                self.transcript.note(f"  ✗ {status}")
        self._update_footer()

    def _finish_reply(self, message: AssistantMessage) -> None:
        """The reply is complete: what is not in the scrollback yet goes there."""
        reply = self._reply or ReplyView(message, style=self.style)
        reply.message = message
        self._streamed = None
        self.transcript.add("reply", reply=reply)
        self.transcript.blocks[-1].skip = self._reply_committed
        self._reply = None
        self._reply_committed = 0

    # -- keys ------------------------------------------------------------------------------

    async def _read_keys(self) -> None:
        """Handle keys until the user leaves or asks for another session."""
        while True:
            try:
                key = await self.keys.read()
            except EOFError:
                return
            if key.name == "ctrl_g" and self._picker is None:
                await self._edit_externally()
            elif self._on_key(key) or self._switch is not None:
                return
            self.render()

    async def _edit_externally(self) -> None:
        """Ctrl+G: the editor's text through ``$VISUAL``/``$EDITOR``; the screen redrawn."""
        try:
            command = editor_command(os.environ)
            self.screen.close()
            with self.suspend():
                text = await edit_text(self.editor.text, command)
        except EditorError as exc:
            self._say(f"  ✗ {exc}")
        else:
            self.editor.set_text(text)
        self._size = None  # the editor drew over the screen: draw it all again

    def _on_key(self, key: Key) -> bool:
        """Handle one key; True means leave."""
        if self._picker is not None:
            self._on_picker_key(key)
            return False
        if key.name == "ctrl_c":
            if self._ctrl_c_armed:
                return True
            self._ctrl_c_armed = True
            if self._session is not None and self.session.is_running:
                self._abort()
            else:
                self.editor.set_text("")
            return False
        self._ctrl_c_armed = False
        if key.name == "ctrl_d":
            if not self.editor.text:
                return True
            self.editor.handle(Key("delete"), self.screen.width)
            return False
        if key.name == "esc":
            self._note = None
            self._controller.press_esc()
        elif key.name == "enter":
            return self._on_enter()
        elif key.name == "ctrl_l":
            self._size = None
        elif key.name == "tab":
            completed = complete(self.editor.text, COMMANDS)
            if completed is not None:
                self.editor.set_text(completed)
        elif key.name == "ctrl_o":  # tool results in full, or collapsed again
            self.transcript.expanded = not self.transcript.expanded
            self._size = None
        else:
            self.editor.handle(key, self.screen.width)
        return False

    def _on_enter(self) -> bool:
        text = self.editor.text
        if not text.strip():
            return False
        word = text.split(maxsplit=1)[0]
        if word not in COMMANDS and (only := the_command(text.strip(), COMMANDS)):
            word = text = only  # "/mo" + Enter: the one command it names
        if word in COMMANDS or word == "/exit":
            self.editor.take()
            return self._command(word, text[len(word) :].strip())
        self.editor.take()
        if self.session.is_running:
            try:
                self.session.steer(self.prompt_input.expand(text))
            except (SessionBusyError, TrioSessionError, ValueError) as exc:
                self._say(f"  ✗ {exc}")
            return False
        self._send(text)
        return False

    def _send(self, text: str) -> None:
        self._note = None
        self._start(self._prompt, text)

    async def _prompt(self, text: str) -> None:
        try:
            text = self.prompt_input.prepare(text, self.session.model, starting=True)
        except PromptRefused as exc:  # as pi: said, and nothing is sent
            self._say(f"  ✗ {exc}")
            self.render()
            return
        try:
            await self.session.prompt(text)
        except SessionBusyError:
            self._note = "still working — esc to abort"
        except HistoryError as exc:
            self._stop_unsaved(exc)
        self.render()

    def _stop_unsaved(self, exc: HistoryError) -> None:
        """The chat cannot go on unsaved: say so, then leave (``run`` raises ``exc``)."""
        self._say(f"✗ not saved: {exc}")
        self._fatal = exc
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel(reason="the session file cannot be written")

    def _start(self, function: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run ``function(*args)`` in the current session's nursery."""
        assert self._prompts is not None
        self._prompts.start_soon(function, *args)

    def _abort(self) -> None:
        if self._session is not None and self.session.is_running:
            self._start(self.session.abort)

    def _abort_retry(self) -> None:
        if self._session is not None:
            self.session.abort_retry()

    # -- commands ------------------------------------------------------------------------

    def _command(self, name: str, argument: str) -> bool:
        """Run a slash command; True means leave."""
        if name in ("/quit", "/exit"):
            return True
        if name == "/help":
            self.transcript.add("help")
        elif name == "/name":
            if argument:
                self.session.set_session_name(argument)
                self._say(f"  session name: {argument}")
            else:
                self._say(f"  session name: {self.session.session_name or '(none)'}")
        elif name == "/compact":
            self._start(self._compact, argument or None)
        elif name == "/model":
            self._choose_model(argument)
        elif name in ("/new", "/resume"):
            if self.opener is None:
                self._say(f"  {name} is not available here (this chat has one session)")
            elif name == "/new":
                self._switch = _Switch(None)
            else:
                self._start(self._pick_session)
        return False

    async def _compact(self, instructions: str | None) -> None:
        if self.session.is_running:
            self._say("  ✗ the agent is working; /compact when it is done")
            return
        try:
            await self.session.compact(instructions)
        except HistoryError as exc:
            self._stop_unsaved(exc)
        except (TrioSessionError, ValueError) as exc:
            self._say(f"  ✗ cannot compact: {exc}")

    def _choose_model(self, query: str) -> None:
        models = self.session.available_models
        if query:
            matches = [m for m in models if query in (m.id, f"{m.provider}/{m.id}")]
            if len(matches) == 1:
                self._start(self._set_model, matches[0])
                return
        items = [(f"{m.provider}/{m.id}", m) for m in models]
        self._picker = Picker("choose a model (enter: choose · esc: close)", items, query)

    async def _set_model(self, model: Model) -> None:
        try:
            await self.session.set_model(model)
        except (TrioSessionError, ValueError) as exc:
            self._say(f"  ✗ cannot switch model: {exc}")
            return
        self._update_footer()
        self._say(f"  model: {model.provider}/{model.id}")

    async def _pick_session(self) -> None:
        if (directory := self.sessions_dir) is None:
            self._say("  /resume: this chat keeps no session files (--no-save)")
            return
        try:
            self._picker = await resume_picker(directory, self.session.session_file)
        except HistoryError as exc:
            self._say(f"  ✗ {exc}")
            return
        self.render()

    def _on_picker_key(self, key: Key) -> None:
        picker = self._picker
        assert picker is not None
        picker.handle(key)
        if not picker.closed:
            return
        self._picker = None
        chosen = picker.chosen
        if isinstance(chosen, Path):
            self._switch = _Switch(chosen)
        elif isinstance(chosen, Model):
            self._start(self._set_model, chosen)
