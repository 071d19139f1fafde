"""The RPC server: commands in, responses and session events out, over any trio Stream.

It is written against ``trio.abc.Stream``; the ``trio-session rpc`` command
adapts stdin/stdout once, at the edge, and tests use in-memory streams. The tree:

```text
RpcServer.serve()                 reads lines and answers them, in order
└── nursery
    ├── writer task               writes what the outbox could not write at once
    ├── session host task         async with factory() as session (one per
    │                             new_session; the first is opened at start)
    ├── prompt task               await session.prompt(text), under a scope
    └── compaction task           await session.compact(), under a scope
```

- Every line gets exactly one response, in the order the lines came (R-42), whatever
  fails underneath (``_runs``). ``prompt`` and ``compact`` start work that outlives
  their line, in a task (one at a time): a prompt is answered once its run has
  started, and the run goes on while later commands are answered — so
  ``abort_retry`` is answered in the middle of a backoff sleep (R-39); a compaction is
  answered when it is over, and the commands after it are answered meanwhile (so
  ``abort`` cancels it and ``get_state`` answers during it). ``compact`` and ``bash``
  are the two answered out of order.
- ``abort`` is answered once the run has ended, after the run's last event.
- Events are written as they happen (R-44): a synchronous subscriber encodes each
  one with ``trio_session.event_to_json`` and puts the line in the outbox, which
  writes it at once when nothing waits and the stream is a pipe (in the task that
  emitted the event, with no hop through another task), and else queues it for the
  writer task; answers are always queued (``_send``). Output is never torn,
  interleaved or reordered (``_outbox``).
- Backpressure, without ever making the session wait: when more than
  ``merge_updates_after`` bytes wait to be written (the client is not keeping up), a
  ``message_update`` still waiting in the queue absorbs the next one of the same
  message part (deltas concatenated, latest partial message kept), so a lagging
  client costs memory in proportion to the answer, not to its length times its
  number of chunks; when more than ``output_high_water`` bytes wait, the server
  stops reading commands until they drain. Nothing is ever dropped.
- End of input (and ``RpcServer.shutdown``, which the command wires to SIGINT,
  SIGTERM and SIGHUP) aborts any run, closes the session, writes what is queued, and
  returns.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from .._core.classes import define, frozen
from .._core.codec import event_to_json, model_to_json, update_to_json
from .._core.errors import HistoryError
from .._core.events import MessageUpdate, SessionEvent
from .._core.groups import unwrapped as _unwrapped
from .._pi.prompt_input import PromptInput, PromptRefused
from .._retry.profile import retry_profile
from .._session.facade import AgentSession
from . import _handlers_session, _handlers_tree, _runs
from ._handlers_tree import NO_FACTORY as NO_FACTORY
from ._host import QUEUED, Handlers, takes_request
from ._host import SessionFactory as SessionFactory  # importable from here as always
from ._host import SessionRequest as SessionRequest
from ._outbox import Outbox, nowait_sender
from ._protocol import (
    MAX_LINE_BYTES,
    Abort,
    AbortRetry,
    Command,
    Compact,
    LineSplitter,
    Overlong,
    Prompt,
    Rejected,
    Response,
    encode_line,
    parse_command,
    response_to_json,
)

if TYPE_CHECKING:  # made at the first bash command
    from ._bash import BashRunner

logger = logging.getLogger("trio_session.rpc")

#: Bytes asked of the input stream per read.
RECEIVE_SIZE: Final = 64 * 1024
#: Queued output (bytes) past which the server stops reading commands.
OUTPUT_HIGH_WATER: Final = 16 * 1024 * 1024
#: Queued output (bytes) past which a ``message_update`` merges into the one before it.
MERGE_UPDATES_AFTER: Final = 1024 * 1024

BUSY: Final = (
    "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') "
    "to queue the message."
)


@frozen
class _Host:
    """The session being served, and how to let go of it."""

    session: AgentSession
    close: Callable[[], Awaitable[None]]


@define(eq=False)
class RpcServer:
    """Serves one client: JSON-lines commands on ``stream``, answers and events back.

    Args:
        sessions: a session factory (``lambda: open_session(provider, …)``), opened
            once at start and again for every ``new_session``; or one
            ``trio_session.AgentSession`` to serve (``new_session`` is then
            refused, and the session is left open at the end).
        stream: where commands come from and where output goes.
        max_line_bytes: the longest command line read (R-42).
        output_high_water: queued output past which reading commands pauses.
        merge_updates_after: queued output past which a ``message_update`` merges
            into the queued one before it (see ``merge_updates``).
        first_session: what the factory is asked for at start (``--session FILE``
            resumes a file); a new session if omitted.
        lean_updates: write every ``message_update`` without the message so far (no
            ``message``, no ``assistantMessageEvent.partial``, no top-level ``delta``):
            the client accumulates deltas by ``contentIndex`` (docs/rpc.md). Off by
            default: the reference's shape, which its own clients read.
        prompt_input: what ``prompt``, ``steer`` and ``follow_up`` text goes through
            first: pi's templates and skills expanded, a prompt without a key refused
            (``trio_session._pi.prompt_input``); ``get_commands`` lists its commands.

    Use ``serve_rpc``, or ``await nursery.start(server.serve)``.
    """

    _sessions: AgentSession | SessionFactory = attrs.field(alias="sessions")
    _stream: trio.abc.Stream = attrs.field(alias="stream")
    max_line_bytes: int = MAX_LINE_BYTES
    output_high_water: int = OUTPUT_HIGH_WATER
    merge_updates_after: int = MERGE_UPDATES_AFTER
    first_session: SessionRequest = attrs.field(factory=SessionRequest)
    lean_updates: bool = False
    prompt_input: PromptInput = attrs.field(factory=PromptInput)
    _outbox: Outbox = attrs.field(init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _host: _Host | None = attrs.field(default=None, init=False)
    _run: _runs.Run | None = attrs.field(default=None, init=False)
    _started: bool = attrs.field(default=False, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _done_reading: bool = attrs.field(default=False, init=False)
    _reading: trio.CancelScope | None = attrs.field(default=None, init=False)
    _waiting: bool = attrs.field(default=False, init=False)  # for input, or for room
    _bash: BashRunner | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._outbox = Outbox(
            self.output_high_water, self.merge_updates_after, nowait_sender(self._stream)
        )

    @property
    def session(self) -> AgentSession:
        """The session being served now (it changes on ``new_session``)."""
        if self._host is None:
            msg = "the server has not started"
            raise RuntimeError(msg)
        return self._host.session

    @property
    def bash(self) -> BashRunner:
        """Runs the ``bash`` commands, one at a time, while other commands are read; made
        at the first one (a server that is sent none never loads it)."""
        if self._bash is None:
            if self._nursery is None:
                msg = "the server has not started"
                raise RuntimeError(msg)
            from ._bash import BashRunner

            self._bash = BashRunner(self._nursery, self._outbox.put, self._send)
        return self._bash

    @property
    def serves_one(self) -> bool:
        """Whether it was given one session to serve (``new_session`` is then refused)."""
        return isinstance(self._sessions, AgentSession)

    @property
    def opens_files(self) -> bool:
        """Whether its factory takes a ``SessionRequest``, so session files can be opened."""
        return not isinstance(self._sessions, AgentSession) and takes_request(self._sessions)

    @property
    def shutting_down(self) -> bool:
        """Whether the server has stopped reading commands (``shutdown``, end of input, or
        a client that went away) and is on its way out."""
        return self._stopping or self._done_reading

    def shutdown(self) -> None:
        """Stop reading commands; ``serve`` then aborts any run and returns.

        Safe to call from any task of the run, at any time, more than once. The
        command being answered, if any, is answered first.
        """
        self._stopping = True
        if self._waiting and self._reading is not None:
            self._reading.cancel(reason="rpc server shutting down")

    async def serve(
        self, *, task_status: trio.TaskStatus[RpcServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Answer commands until the input ends or ``shutdown`` is called.

        Reports itself to ``task_status`` once the session is open. On the way out:
        aborts the run it started, closes the session it opened, writes everything
        queued, and sends end-of-stream if the stream can half-close.

        Args:
            task_status: given the server once its session is open (``nursery.start``).
        """
        if self._started:
            msg = "an RpcServer serves once; make a new one"
            raise RuntimeError(msg)
        self._started = True
        with _unwrapped():
            await self._serve(task_status)
        if isinstance(self._stream, trio.abc.HalfCloseableStream) and not self._outbox.broken:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stream.send_eof()

    async def _serve(self, task_status: trio.TaskStatus[RpcServer]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._outbox.pump, self._stream, self.shutdown)
            self._host = await self._open()
            task_status.started(self)
            try:
                await self._read_commands()
            finally:
                self._done_reading = True
                if self._bash is not None:  # answered before the output closes
                    await self._bash.abort(self._host.session)
                await self.abort_run()
                await self._host.close()
                self._outbox.close()

    # -- sessions ------------------------------------------------------------------

    async def _open(self) -> _Host:
        if isinstance(self._sessions, AgentSession):
            unsubscribe = self._sessions.subscribe(self._on_event)

            async def release() -> None:
                unsubscribe()

            return _Host(self._sessions, release)
        assert self._nursery is not None
        host: _Host = await self._nursery.start(self._hold, self._sessions, self.first_session)
        return host

    async def _hold(
        self,
        factory: SessionFactory,
        request: SessionRequest,
        *,
        task_status: trio.TaskStatus[_Host],
    ) -> None:
        """Keep one session open until its host is closed.

        What cannot be saved as it closes (a full disk) is logged in one line: the
        server goes on (new_session) or ends as it was ending; the file stays whole.
        """
        release = trio.Event()
        gone = trio.Event()
        served = False

        async def close() -> None:
            release.set()
            await gone.wait()

        try:
            async with factory(request) if takes_request(factory) else factory() as session:
                unsubscribe = session.subscribe(self._on_event)
                task_status.started(_Host(session, close))
                served = True
                await release.wait()
            unsubscribe()  # after the block: events of its shutdown still go out
        except HistoryError as exc:
            if not served:  # it could not be opened: the command that asked says so
                raise
            unsubscribe()
            logger.warning("%s", exc)
        finally:
            gone.set()

    def _on_event(self, event: SessionEvent) -> None:
        if isinstance(event, MessageUpdate):
            self._outbox.put_update(update_to_json(event, lean=self.lean_updates))
        else:
            self._outbox.put(encode_line(event_to_json(event)))

    # -- reading -------------------------------------------------------------------

    async def _read_commands(self) -> None:
        splitter = LineSplitter(self.max_line_bytes)
        # One scope for all the reading, not one per wait: ``shutdown`` cancels it only
        # while the reader waits (for input, or for room), never in the middle of an answer.
        with trio.CancelScope() as self._reading:
            while (data := await self._receive()) is not None:
                for line in splitter.feed(data) if data else splitter.close():
                    # Room is checked per line: one chunk of small commands can ask for a
                    # great deal of output (get_messages), and it must not all pile up.
                    if not await self._wait_for_room():
                        return
                    await self._answer(line)
                    if self._stopping:
                        return
                if not data:
                    return  # end of input

    async def _receive(self) -> bytes | bytearray | None:
        """The next chunk of input; ``b""`` at its end; ``None`` once shutting down."""
        if self._stopping:
            return None
        self._waiting = True
        try:
            data = await self._stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        finally:
            self._waiting = False
        return None if self._stopping else data

    async def _wait_for_room(self) -> bool:
        """Wait while the output is backed up; False once shutting down."""
        if self._stopping:
            return False
        if self._outbox.backed_up:
            self._waiting = True
            try:
                await self._outbox.wait_for_room()
            finally:
                self._waiting = False
        return not self._stopping

    async def _answer(self, line: bytes | Overlong) -> None:
        parsed = line.rejected if isinstance(line, Overlong) else parse_command(line)
        if isinstance(parsed, Rejected):
            self._send(Response.rejected(parsed))
            return
        try:
            response = await self._handle(parsed)
        except Exception as exc:  # the session failed us; say so and keep serving
            logger.exception("rpc command %s failed", parsed.type)
            response = Response.failed(parsed, f"{type(exc).__name__}: {exc}")
        if response is not None:  # None: a task answers it later (bash)
            self._send(response)

    def _send(self, response: Response) -> None:
        """Queue an answer for the writer task; it is never written at once, as events are.

        A client sends its next command on an answer, and the passes the writer task
        takes let what the command set going emit its first events before that command
        is read. pi's clients expect it: a ``steer`` sent on the answer to a prompt that
        joined a retry's backoff lands after the re-attempt's user message (docs/rpc.md,
        ``backoff-steer-order``); written at once, the answer let it overtake the
        re-attempt's first events in some runs of the interop scenario.
        """
        self._outbox.queue(encode_line(response_to_json(response)))

    # -- commands ------------------------------------------------------------------

    async def _handle(self, command: Command) -> Response | None:
        return await HANDLERS[type(command)](self, command)

    def state(self) -> dict[str, Any]:
        """The ``get_state`` data: the reference's fields that apply, plus retry state (R-41).

        ``isStreaming`` is true from a ``prompt`` until its run is completely over —
        backoff sleeps and compaction included — unlike the reference, where it
        drops between attempts; during a manual ``compact`` it is false and
        ``isCompacting`` true, as the reference's. ``pendingMessageCount``,
        ``steeringMode`` and ``followUpMode`` are the session's queues.
        ``credentialStore`` is there when the credential store reports a status (a
        Redis store); ``isRateLimited`` (ours, R-69) when ``rateLimit`` limits the
        model: whether a request waits for its permit. ``retryProfile`` is the settings'
        ``retry.profile`` (R-53); pi 1.6.0 has no command to change it, nor have we: it
        is set in a settings file or with ``--retry-profile``.
        """
        session = self.session
        return {
            "model": model_to_json(session.model),
            "thinkingLevel": session.thinking_level,
            "isStreaming": self._streaming(),
            "isCompacting": session.is_compacting,
            "sessionId": session.session_id,
            **self._session_file_state(),
            "autoCompactionEnabled": session.auto_compaction_enabled,
            "messageCount": len(session.messages),
            "pendingMessageCount": session.pending_message_count,
            "steeringMode": session.steering_mode,
            "followUpMode": session.follow_up_mode,
            "autoRetryEnabled": session.auto_retry_enabled,
            "isRetrying": session.is_retrying,
            "retryAttempt": session.retry_attempt,
            "retryProfile": retry_profile(session.settings.retry),
            **self._credential_store_state(),
            **self._rate_limit_state(),
        }

    def _streaming(self) -> bool:
        run = self._run
        return self.session.is_running if run is None else not run.compaction

    def _credential_store_state(self) -> dict[str, Any]:
        """``credentialStore`` for ``get_state`` (``"redis"`` / ``"local-fallback"``), when
        the session's credential store reports a status."""
        status = self.session.credential_store_status
        return {} if status is None else {"credentialStore": status}

    def _rate_limit_state(self) -> dict[str, Any]:
        """``isRateLimited`` for ``get_state``, when ``rateLimit`` limits the model or
        learns its limits from the provider's headers (a learned limit waits too)."""
        session = self.session
        group = session.settings.rate_limit
        if not (group.limits(session.model.id).limited or group.learn):
            return {}
        return {"isRateLimited": session.is_rate_limited}

    async def start_prompt(self, command: Prompt) -> Response | None:
        """Start ``command``'s run in the prompt task, or queue its message into the run.

        Args:
            command: the ``prompt`` command.

        Returns:
            Its answer; ``None`` when the prompt task gave it (queued just before the
                run's first event, or why the run could not start), which this waits for.
        """
        run = self._run
        if run is not None and run.compaction:  # as pi 1.6.0, queued or not
            return Response.failed(command, _runs.COMPACTING)
        starting = run is None and not self.session.is_running
        try:
            text = self.prompt_input.prepare(command.message, self.session.model, starting=starting)
        except PromptRefused as exc:  # as pi: the prompt's answer says it, no run starts
            return Response.failed(command, str(exc))
        command = attrs.evolve(command, message=text)
        if not starting:
            if self.session.join_retry(command.message, command.images):
                # In a backoff sleep nothing streams: the seed reference starts the prompt
                # at once (streamingBehavior or not); here the wait is cut short and the
                # re-attempt sends it — one run, the same messages: queued
                # into the run, whose agent_settled covers it.
                pass
            elif command.streaming_behavior == "followUp":
                self.session.follow_up(command.message, command.images)
            elif command.streaming_behavior == "steer":
                self.session.steer(command.message, command.images)
            else:
                return Response.failed(command, BUSY)
            return Response.ok(command, QUEUED)
        run = self._run = _runs.Run(self.session)
        answer = _runs.PromptAnswer(command, self._send)
        self._start(_runs.run_prompt, run, answer)
        await answer.given.wait()
        return None

    async def start_compact(self, command: Compact) -> None:
        """Abort any run, then start the compaction task, which answers ``command`` when
        the compaction is over.

        Args:
            command: the ``compact`` command.
        """
        await self.abort_run()  # as the reference: a running prompt is aborted first
        run = self._run = _runs.Run(self.session, compaction=True)
        self._start(_runs.run_compaction, run, command, self._send)

    def _start(self, task: Callable[..., Awaitable[None]], run: _runs.Run, *args: Any) -> None:
        """Run ``task(run, *args)`` in the server's nursery; ``self._run`` until it ends."""

        async def running() -> None:
            try:
                await task(run, *args)
            finally:
                if self._run is run:
                    self._run = None

        assert self._nursery is not None
        self._nursery.start_soon(running)

    async def abort_retry(self) -> None:
        """Cancel the retry chain; return once its ``auto_retry_end`` (and, when the chain
        was the run's, the run's ``agent_settled``) is queued."""
        session = self.session
        run, retrying = self._run, session.is_retrying
        session.abort_retry()
        await session.wait_for_retry_end()  # auto_retry_end goes out before the answer
        if retrying and run is not None:  # the chain was the run's: it is over now,
            await run.done.wait()  # and its agent_settled goes out first too

    async def abort_run(self) -> None:
        """Cancel the retry, then the run (R-32) or the compaction; return when its task
        is over (its answer queued)."""
        run = self._run
        if run is None:
            return
        await run.session.abort()
        run.scope.cancel(reason="rpc abort")  # a task that had not started yet
        await run.done.wait()

    def _session_file_state(self) -> dict[str, Any]:
        """``sessionFile`` and ``sessionName`` for ``get_state``, each omitted when unset."""
        session = self.session
        state: dict[str, Any] = {}
        if session.session_file is not None:
            state["sessionFile"] = str(session.session_file)
        if session.session_name is not None:
            state["sessionName"] = session.session_name
        return state

    async def replace(self, request: SessionRequest) -> None:
        """Abort any run, open the requested session, then close the old one.

        If the new one cannot be opened the old one stays, and the error is raised.
        A file already open here (``switch_session`` to the current file) is
        closed first and opened again.

        Args:
            request: what the factory is asked to open.
        """
        await self.abort_run()
        old = self._host
        assert old is not None
        assert self._nursery is not None
        current = old.session.session_file
        if (
            request.history is not None
            and current is not None
            and _same_file(request.history, current)
        ):
            await old.close()
            try:
                self._host = await self._nursery.start(self._hold, self._sessions, request)
            except BaseException:
                again = SessionRequest(history=current)
                self._host = await self._nursery.start(self._hold, self._sessions, again)
                raise
            return
        self._host = await self._nursery.start(self._hold, self._sessions, request)
        await old.close()


async def _prompt(server: RpcServer, command: Prompt) -> Response | None:
    return await server.start_prompt(command)


async def _compact(server: RpcServer, command: Compact) -> None:
    await server.start_compact(command)  # None: its task answers it when it is over


async def _abort(server: RpcServer, command: Abort) -> Response:
    await server.abort_run()
    return Response.ok(command)


async def _abort_retry(server: RpcServer, command: AbortRetry) -> Response:
    await server.abort_retry()
    return Response.ok(command)


#: Every command → its handler: the run's own here, the others from their modules.
HANDLERS: Final[Handlers] = {
    Prompt: _prompt,
    Compact: _compact,
    Abort: _abort,
    AbortRetry: _abort_retry,
    **_handlers_session.HANDLERS,
    **_handlers_tree.HANDLERS,
}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.samefile(b)
    except (OSError, RuntimeError):  # RuntimeError: a loop of links (Python 3.11, 3.12)
        return False


async def serve_rpc(
    sessions: AgentSession | SessionFactory,
    stream: trio.abc.Stream,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    first_session: SessionRequest | None = None,
    lean_updates: bool = False,
    task_status: trio.TaskStatus[RpcServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the RPC protocol on ``stream`` until its input ends.

    ``sessions`` is a factory of sessions (``lambda request: open_session(provider,
    history=request.history)``, see ``SessionRequest``) or one
    ``trio_session.AgentSession``; ``first_session`` is what it is asked for first;
    ``lean_updates`` writes ``message_update`` events without the message so far
    (see ``RpcServer``). Started with ``await nursery.start(serve_rpc, …)`` it reports
    the ``RpcServer``, whose ``RpcServer.shutdown`` ends it early:

    ```python
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_rpc, lambda: open_session(provider), stream)
    ```

    Args:
        sessions: a session factory, or one session.
        stream: the connection: commands are read from it, responses and events written to it.
        max_line_bytes: the longest command line read (R-42).
        first_session: what ``sessions`` is asked for first; a new session if ``None``.
        lean_updates: write ``message_update`` events without the message so far.
        task_status: given the ``RpcServer`` once its session is open.
    """
    server = RpcServer(
        sessions,
        stream,
        max_line_bytes=max_line_bytes,
        first_session=first_session if first_session is not None else SessionRequest(),
        lean_updates=lean_updates,
    )
    await server.serve(task_status=task_status)
