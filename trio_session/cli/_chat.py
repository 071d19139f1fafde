"""``trio-session chat``: the terminal UI on a terminal, else one prompt per line."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import BinaryIO, TextIO

import trio

from .._command_keys import open_credentials
from .._commands import CommandError, history_path
from .._core.messages import AssistantMessage
from .._pi.prompt_input import PromptInput, PromptRefused
from .._session.facade import AgentSession
from .._session.opening import open_session
from .._settings.store import SettingsStore
from ..store._entries import HistoryError
from ._output import Printer, is_terminal, show
from ._setup import (
    credentials_url,
    extensions,
    models,
    open_model,
    prompt_input,
    session_start,
)

#: Exit status of ``chat`` when the session file cannot be written (it stops there).
NOT_SAVED = 1


def _read_line(stdin: BinaryIO, number: int) -> str | None:
    """One line of input as text; bytes that are not UTF-8 become U+FFFD, with a warning."""
    raw = stdin.readline()
    if not raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        print(
            f"trio-session: warning: input line {number} is not valid UTF-8; "
            "the invalid bytes were replaced with U+FFFD",
            file=sys.stderr,
        )
        return raw.decode("utf-8", errors="replace")


async def _send(session: AgentSession, prompts: PromptInput, line: str) -> AssistantMessage | None:
    """Send one prompt and return the reply; ``None`` if it could not be sent.

    The line is expanded (pi's templates and skills) before the session gets it; a
    prompt that cannot be sent (no key) is said on stderr, in pi's words.

    Raises:
        HistoryError: the session file could not be written.
    """
    try:
        text = prompts.prepare(line.strip(), session.model, starting=True)
    except PromptRefused as exc:
        print(f"trio-session: {exc}", file=sys.stderr)
        return None
    return await session.prompt(text)


async def _chat_lines(
    session: AgentSession,
    out: TextIO,
    stdin: BinaryIO,
    prompts: PromptInput,
    first: Sequence[str] = (),
) -> int:
    """The plain line mode: the ``first`` prompts, then one per line of stdin.

    Events are printed as lines; a prompt that cannot be sent is said on stderr and
    the next line is read.
    """
    printer = Printer(out)
    status = 0
    with session.events() as events:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(show, events, printer, False)
            number = 0
            given = iter(first)
            while True:
                line = next(given, None)
                if line is None:
                    number += 1
                    line = await trio.to_thread.run_sync(
                        _read_line, stdin, number, abandon_on_cancel=True
                    )
                if line is None:
                    break
                if not line.strip():
                    continue
                try:
                    reply = await _send(session, prompts, line)
                except HistoryError as exc:
                    print(f"trio-session: {exc}; stopping", file=sys.stderr)
                    status = NOT_SAVED
                    break
                if reply is None:
                    status = 1
                    continue
                status = 0 if reply.stop_reason in ("stop", "length") else 1
            await session.aclose()
    return status


def _read_all(stdin: BinaryIO) -> str:
    """All of piped stdin as text, trimmed (invalid UTF-8 becomes U+FFFD); empty on a TTY."""
    if stdin.isatty():
        return ""
    return stdin.read().decode("utf-8", errors="replace").strip()


async def _print_messages(args: argparse.Namespace, stdin: BinaryIO) -> list[str]:
    """``chat -p``'s prompts: piped stdin (if any) before the first MESSAGE, as pi's.

    Raises:
        CommandError: there is nothing to send.
    """
    piped = await trio.to_thread.run_sync(_read_all, stdin, abandon_on_cancel=True)
    messages: list[str] = [m for m in args.messages if m.strip()]
    if piped:
        messages[:1] = ["\n\n".join([piped, *messages[:1]])]
    if not messages:
        raise CommandError('-p needs a message: trio-session -p "QUESTION"')
    return messages


async def _print_answer(
    session: AgentSession, prompts: PromptInput, messages: Sequence[str]
) -> int:
    """``chat -p``: send ``messages`` in turn, print the last answer's text on stdout.

    As pi's print mode: the retry story and the errors go to stderr; an error, an
    abort or a cut-off answer (``length``, whose text is still printed) exits 1.
    """
    reply: AssistantMessage | None = None
    with session.events() as events:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(show, events, Printer(sys.stderr, story_only=True), False)
            for message in messages:
                reply = await _send(session, prompts, message)
                if reply is None or reply.stop_reason in ("error", "aborted"):
                    break
            await session.aclose()
    if reply is None:
        return 1
    if reply.stop_reason in ("error", "aborted"):
        print(f"trio-session: {reply.error_message or reply.stop_reason}", file=sys.stderr)
        return 1
    print(reply.text)
    if reply.stop_reason == "length":
        print(
            "trio-session: the answer was cut off at the model's output token limit",
            file=sys.stderr,
        )
        return 1
    return 0


#: Signals that end ``chat`` as Ctrl+C does: the running prompt is aborted, the
#: session file flushed, and the process exits with 128 + the signal's number.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


async def _stop_on_signals(scope: trio.CancelScope, received: list[int]) -> None:
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async for signum in signals:
            received.append(signum)
            scope.cancel(reason=f"{signal.Signals(signum).name} received")
            return


async def run_chat(args: argparse.Namespace, settings: SettingsStore) -> int:
    """``trio-session chat``: a conversation with a real (or scripted) model.

    SIGTERM and SIGHUP (a closed terminal) end it as Ctrl+C does: the running
    prompt is aborted, everything is written to the session file, and the exit
    status is 128 + the signal's number.
    """
    received: list[int] = []
    status = 0
    with trio.CancelScope() as stop:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop_on_signals, stop, received)
            try:
                status = await _chat(args, settings)
            except HistoryError as exc:  # the last entries could not be saved on the way out
                print(f"trio-session: {exc}", file=sys.stderr)
                status = NOT_SAVED
            nursery.cancel_scope.cancel(reason="chat ended")
    if received:
        name = signal.Signals(received[0]).name
        with contextlib.suppress(OSError):  # after SIGHUP there may be no terminal left
            print(f"\ntrio-session: stopped by {name}; the session is saved", file=sys.stderr)
        return 128 + received[0]
    return status


async def _chat(args: argparse.Namespace, settings: SettingsStore) -> int:
    messages: list[str] = args.messages
    if args.print:
        messages = await _print_messages(args, sys.stdin.buffer)
    elif len(messages) > 1 and is_terminal():
        raise CommandError("on a terminal, chat takes one MESSAGE (quote it)")
    loaded = extensions(args.extension)
    start = session_start(args, settings, create_new=True)
    prompts = prompt_input(args)
    async with (
        open_model(args) as (provider, model),
        open_credentials(
            provider.name,
            None if args.agent_dir_key else args.api_key,
            credentials_url(args, settings),
            agent_dir_key=args.agent_dir_key,
        ) as credentials,
    ):

        def opener(file: Path | None) -> AbstractAsyncContextManager[AgentSession]:
            """Open ``file``, or a new session (``/new``) when it is None."""
            if file is None and start.directory is not None:
                file = history_path(
                    resume=None, continue_latest=False, save=True, directory=start.directory
                )
            return open_session(
                provider,
                model,
                settings=settings,
                credentials=credentials,
                extensions=loaded,
                history=file,
                system_prompt=args.system_prompt,
                tools=args.tools,
                models=models(args, model),
                thinking_level=args.thinking_level,
            )

        if args.print:
            async with _named(opener, args.name)(start.path) as session:
                file = session.history_file
                for warning in file.loaded.warnings if file is not None and file.loaded else ():
                    print(f"trio-session: warning: {warning}", file=sys.stderr)
                return await _print_answer(session, prompts, messages)
        if is_terminal():
            # The terminal UI: it shows the file, its load warnings, the conversation so far.
            from ..tui._input_history import InputHistory, default_history_path
            from ..tui._terminal_chat import run_terminal_chat

            # pi's --resume without a file: a picker of this directory's sessions, over a
            # new session (whose file is written only if something is said in it).
            pick = args.resume == "" and not messages and start.directory is not None
            try:
                await run_terminal_chat(
                    opener=_named(opener, args.name),
                    resume=None if pick else start.path,
                    pick_session=pick,
                    sessions_dir=start.directory,
                    history=InputHistory.load(default_history_path()),
                    banner=lambda s: f"trio-session chat · {s.model.provider} {s.model.id}",
                    prompt_input=prompts,
                    first_prompt=messages[0] if messages else None,
                )
            except HistoryError as exc:
                print(f"trio-session: {exc}; stopping", file=sys.stderr)
                return NOT_SAVED
            return 0
        async with _named(opener, args.name)(start.path) as session:
            file = session.history_file
            warnings = file.loaded.warnings if file is not None and file.loaded else ()
            for warning in warnings:
                print(f"trio-session: warning: {warning}", file=sys.stderr)
            if start.path is not None:
                print(f"trio-session: session file {start.path}", file=sys.stderr)
            return await _chat_lines(session, sys.stdout, sys.stdin.buffer, prompts, messages)


def _named(
    opener: Callable[[Path | None], AbstractAsyncContextManager[AgentSession]], name: str | None
) -> Callable[[Path | None], AbstractAsyncContextManager[AgentSession]]:
    """``opener``, naming the first session it opens ``name`` (``--name``), if given."""
    if name is None:
        return opener
    pending = [name]

    @contextlib.asynccontextmanager
    async def named(file: Path | None) -> AsyncIterator[AgentSession]:
        async with opener(file) as session:
            if pending:
                session.set_session_name(pending.pop())
            yield session

    return named
