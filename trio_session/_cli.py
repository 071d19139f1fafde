"""The ``trio-session`` command. The only place that parses ``argv``."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import trio

from . import __version__
from ._codec import event_to_json
from ._commands import (
    CommandError,
    api_key_flag_warning,
    auth_add,
    auth_list,
    auth_remove,
    history_path,
    load_settings,
    open_credentials,
    open_provider,
    preflight,
    read_api_key_file,
    select_model,
    sessions_dir,
)
from ._errors import TrioSessionError
from ._events import (
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    HistoryWriteFailed,
    MessageEnd,
    MessageUpdate,
    SessionEvent,
)
from ._extensions import Extension, load_entry_point_extensions, load_extension_file
from ._messages import AssistantMessage, UserMessage
from ._opening import open_session
from ._pi_config import (
    AGENT_DIR_VARIABLE,
    AgentDirConfig,
    agent_dir_from,
    available_models,
    load_agent_dir,
)
from ._session import AgentSession, EventStream
from ._settings import RANGES, SettingsStore
from .providers._base import Model, Provider, ProviderRequest
from .providers._faux import FauxProvider, FauxReply
from .store._history import HistoryError
from .store._session_file import SessionFile, open_history

# The terminal UI and the RPC server are imported by the command that runs them: ``rpc``
# does not load the UI, and ``chat`` on a pipe loads neither.

DEMO_PROMPT = "Say hello, and tell me what just happened."
DEMO_ANSWER = (
    "Hello! The provider answered 503 twice; the session waited 2 s, then 4 s, "
    "and the third attempt got through."
)


def demo_script() -> list[FauxReply]:
    """The demo's provider: two 503s, then a streamed answer."""
    error = "503 Service Unavailable: the server is temporarily overloaded"
    words = DEMO_ANSWER.split(" ")
    chunks = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
    return [
        FauxReply(error=error, delay=0.2),
        FauxReply(error=error, delay=0.2),
        FauxReply(text=DEMO_ANSWER, chunks=chunks, delay=0.2, chunk_delay=0.03),
    ]


class _Printer:
    """Human-readable event output for the line mode."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.streaming = False

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def event(self, event: SessionEvent) -> None:
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
            seconds = round(event.delay_ms / 1000)
            line = f"  ↻ retrying ({event.attempt}/{event.max_attempts}) in {seconds}s…"
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
            seconds = math.ceil(remaining)
            self.write(
                f"\r  ↻ retrying ({event.attempt}/{event.max_attempts}) in {seconds}s… \x1b[K"
            )


async def _show(events: EventStream, printer: _Printer, as_json: bool) -> None:
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


async def _countdown(printer: _Printer, event: AutoRetryStart, scope: trio.CancelScope) -> None:
    with scope:
        deadline = trio.current_time() + event.delay_ms / 1000
        while (remaining := deadline - trio.current_time()) > 0:
            printer.countdown(event, remaining)
            await trio.sleep(min(1.0, remaining - math.floor(remaining) or 1.0))


def _echo(request: ProviderRequest) -> FauxReply:
    """The demo's answer once its script is played: say what was heard."""
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    heard = users[-1].text if users else ""
    return FauxReply(text=f"(demo) You said: {heard}", delay=0.2)


def _is_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


async def run_demo(
    out: TextIO,
    *,
    as_json: bool = False,
    settings: SettingsStore | None = None,
    extensions: Sequence[Extension] = (),
    interactive: bool = False,
) -> int:
    """An offline session on the faux provider: two 503s, then an answer.

    With ``interactive`` (a terminal on both ends), the chat UI opens with the demo
    prompt already sent; otherwise the events are printed as lines and it exits.
    """
    provider = FauxProvider([*demo_script(), *[_echo] * 1000])
    model = Model(id="faux-demo", provider="faux", context_window=32_000)
    banner = (
        "trio-session demo: an offline session whose provider fails twice with 503,\n"
        "then answers. Watch the retry policy at work"
    )
    async with open_session(provider, model, settings=settings, extensions=extensions) as session:
        if interactive:
            from .tui._app import run_terminal_chat

            await run_terminal_chat(
                session, first_prompt=DEMO_PROMPT, banner=banner + " (Esc cancels a retry)."
            )
            return 0
        printer = _Printer(out)
        if not as_json:
            printer.write(banner + " (Ctrl+C to stop).\n\n")
        with session.events() as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_show, events, printer, as_json)
                reply = await session.prompt(DEMO_PROMPT)
                await session.aclose()  # ends the event stream, so _show returns
    return 0 if reply.stop_reason == "stop" else 1


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


async def _chat_lines(session: AgentSession, out: TextIO, stdin: BinaryIO) -> int:
    """The plain line mode: one prompt per line of stdin, events printed as lines."""
    printer = _Printer(out)
    status = 0
    with session.events() as events:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_show, events, printer, False)
            number = 0
            while True:
                number += 1
                line = await trio.to_thread.run_sync(
                    _read_line, stdin, number, abandon_on_cancel=True
                )
                if line is None:
                    break
                if line.strip():
                    try:
                        reply = await session.prompt(line.strip())
                    except HistoryError as exc:
                        print(f"trio-session: {exc}; stopping", file=sys.stderr)
                        status = NOT_SAVED
                        break
                    status = 0 if reply.stop_reason in ("stop", "length") else 1
            await session.aclose()
    return status


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
    extensions = _extensions(args.extension)
    directory = sessions_dir(settings, _agent_dir_path(args))
    path = history_path(
        resume=args.resume,
        continue_latest=args.continue_,
        save=not args.no_save,
        directory=directory,
    )
    async with (
        _provider(args) as (provider, model),
        open_credentials(
            provider.name,
            None if args.agent_dir_key else args.api_key,
            _credentials_url(args, settings),
            agent_dir_key=args.agent_dir_key,
        ) as credentials,
    ):

        def opener(file: Path | None) -> AbstractAsyncContextManager[AgentSession]:
            """Open ``file``, or a new session (``/new``) when it is None."""
            if file is None:
                file = history_path(
                    resume=None, continue_latest=False, save=not args.no_save, directory=directory
                )
            return open_session(
                provider,
                model,
                settings=settings,
                credentials=credentials,
                extensions=extensions,
                history=file,
                system_prompt=args.system,
                models=_models(args, model),
            )

        if _is_terminal():
            # The terminal UI: it shows the file, its load warnings, the conversation so far.
            from .tui._app import run_terminal_chat
            from .tui._input_history import InputHistory, default_history_path

            try:
                await run_terminal_chat(
                    opener=opener,
                    resume=path,
                    sessions_dir=None if args.no_save else directory,
                    history=InputHistory.load(default_history_path()),
                    banner=f"trio-session chat · {model.provider} {model.id}",
                )
            except HistoryError as exc:
                print(f"trio-session: {exc}; stopping", file=sys.stderr)
                return NOT_SAVED
            return 0
        async with opener(path) as session:
            file = session.history_file
            warnings = file.loaded.warnings if file is not None and file.loaded else ()
            for warning in warnings:
                print(f"trio-session: warning: {warning}", file=sys.stderr)
            if path is not None:
                print(f"trio-session: session file {path}", file=sys.stderr)
            return await _chat_lines(session, sys.stdout, sys.stdin.buffer)


async def run_rpc(args: argparse.Namespace, settings: SettingsStore) -> int:
    """``trio-session rpc``: serve until stdin ends or a stop signal comes.

    Exit status: 0 at end of input or on SIGTERM; 128 + the signal's number on SIGINT
    (130) or SIGHUP (129), as a shell reports a command those signals ended. Every
    way out first aborts the run and writes every line owed.
    """
    from .rpc._server import SessionRequest
    from .rpc._stdio import serve_stdio

    extensions = _extensions(args.extension)
    # A session file like pi's: new ones under --session-dir (or our sessions dir for
    # the cwd), none with --no-session; --session FILE resumes (or starts) that file.
    directory: Path | None = None
    if not args.no_session:
        directory = (
            Path(args.session_dir)
            if args.session_dir
            else sessions_dir(settings, _agent_dir_path(args))
        )
    first = SessionRequest(history=Path(args.session) if args.session else None)
    async with (
        _provider(args) as (provider, model),
        open_credentials(
            provider.name,
            None if args.agent_dir_key else args.api_key,
            _credentials_url(args, settings),
            agent_dir_key=args.agent_dir_key,
        ) as credentials,
    ):
        # One settings store for every session: set_auto_retry outlives new_session,
        # as the reference's settings do.
        @contextlib.asynccontextmanager
        async def sessions(request: SessionRequest) -> AsyncIterator[AgentSession]:
            async with contextlib.AsyncExitStack() as stack:
                history: SessionFile | None = None
                if request.history is not None:
                    history = await stack.enter_async_context(open_history(request.history))
                elif directory is not None:
                    history = await stack.enter_async_context(
                        open_history(directory=directory, parent_session=request.parent_session)
                    )
                yield await stack.enter_async_context(
                    open_session(
                        provider,
                        model,
                        settings=settings,
                        credentials=credentials,
                        extensions=extensions,
                        history=history,
                        models=_models(args, model),
                    )
                )

        stopped_by = await serve_stdio(
            sessions, first_session=first, lean_updates=args.lean_updates
        )
    if stopped_by in (signal.SIGINT, signal.SIGHUP):
        return 128 + stopped_by
    return 0


def run_auth(args: argparse.Namespace) -> int:
    """``trio-session auth add|list|remove``: keys in the credential store, never printed."""
    if args.auth == "add":
        print(auth_add(args.provider, args.label))
    elif args.auth == "list":
        for line in auth_list():
            print(line)
    else:
        print(auth_remove(args.provider, args.which))
    return 0


def _provider(args: argparse.Namespace) -> AbstractAsyncContextManager[tuple[Provider, Model]]:
    """The provider of ``--provider`` (``faux`` whenever ``--faux`` is given)."""
    return open_provider(
        "faux" if args.faux is not None else args.provider,
        model_id=args.model,
        base_url=args.base_url,
        context_window=args.context_window,
        faux_script=args.faux,
        attempt_timeout=args.timeout,
        idle_timeout=args.idle_timeout,
        model=args.model_choice,
        agent_dir=args.agent_dir_config,
    )


def _extensions(paths: Sequence[str]) -> list[Extension]:
    """``--extension FILE`` files, then the installed entry-point extensions."""
    return [*(load_extension_file(p) for p in paths), *load_entry_point_extensions()]


# -- argv ----------------------------------------------------------------------------------


def _settings_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--settings",
        metavar="FILE",
        action="append",
        default=[],
        help="a settings JSON file, above the global and project ones (repeatable)",
    )
    command.add_argument(
        "--ignore-broken-settings",
        action="store_true",
        help="start without a settings file that cannot be read, with a warning",
    )
    command.add_argument(
        "--extension",
        metavar="FILE",
        action="append",
        default=[],
        help="load an extension from a Python file (repeatable)",
    )


def _provider_options(command: argparse.ArgumentParser, *, default: str | None) -> None:
    command.add_argument(
        "--provider",
        metavar="NAME",
        default=default,
        help="the model provider: openai, anthropic, gemini, faux, or (with --agent-dir) a "
        "provider of pi's (default: the settings' defaultProvider, else openai; keys: "
        "trio-session auth, OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY)",
    )
    command.add_argument(
        "--model",
        metavar="ID",
        help="the model id (default: the settings' defaultModel, else the provider's)",
    )
    command.add_argument(
        "--agent-dir",
        metavar="DIR",
        help="read pi's agent directory: DIR/settings.json, DIR/models.json, DIR/auth.json "
        f"and ./.pi/settings.json (default: ${AGENT_DIR_VARIABLE} if set)",
    )
    command.add_argument(
        "--base-url",
        metavar="URL",
        help="the API root, e.g. a local OpenAI-compatible server's http://127.0.0.1:8080/v1 "
        "(default: the model's, else $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL / "
        "$GEMINI_BASE_URL, else the provider's own; a key is optional off the provider's own)",
    )
    keys = command.add_mutually_exclusive_group()
    keys.add_argument(
        "--api-key",
        metavar="KEY",
        help="use this key; every local user can read it in ps (prefer --api-key-file)",
    )
    keys.add_argument(
        "--api-key-file",
        metavar="PATH",
        help="use the key on the first line of PATH ('-': one line of stdin)",
    )
    command.add_argument(
        "--credentials",
        metavar="URL",
        help="share usage-limit blocks with a fleet through Redis: redis://HOST:PORT/DB, "
        "rediss://… (TLS) or unix:///PATH (default: the settings' credentials.url, else "
        "the local key store)",
    )
    command.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds("retry.provider.timeoutMs"),
        help="give up on an attempt after this long in all (retry.provider.timeoutMs; 600)",
    )
    command.add_argument(
        "--idle-timeout",
        metavar="SECONDS",
        type=_seconds("retry.provider.idleTimeoutMs"),
        help="give up on an attempt after this long without a byte "
        "(retry.provider.idleTimeoutMs; 120)",
    )
    command.add_argument(
        "--context-window", metavar="TOKENS", type=int, help="the model's context window"
    )
    command.add_argument(
        "--faux", metavar="SCRIPT", help="play a JSON faux script instead of a real model"
    )


def _seconds(key: str) -> Callable[[str], float]:
    """An argparse type: seconds within the range of the settings ``key`` (milliseconds)."""
    low, high = (ms / 1000 for ms in RANGES[key])

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # NaN is in no range
            msg = f"must be a number of seconds from {low:g} to {high:g}, not {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse


def _provider_inputs(args: argparse.Namespace, settings: SettingsStore) -> None:
    """Resolve the key and the timeouts of ``chat``/``rpc`` into ``args``, once, up front.

    A flag wins over the settings; a timeout flag left out takes its setting. The key
    of ``--api-key-file`` is read here, so ``-`` takes its line of stdin before the
    chat or the RPC server reads any. Then the pre-flight (``preflight``): a malformed
    base URL, or no key where one is needed, stops the command here (exit 2), before
    any session opens.
    """
    args.model_choice = None
    args.agent_dir_key = None
    if args.faux is not None or args.provider == "faux":
        provider = "faux"
    else:
        args.model_choice = select_model(
            provider=args.provider,
            model_id=args.model,
            settings=settings.current,
            agent_dir=args.agent_dir_config,
        )
        provider = args.model_choice.provider
    if args.api_key is not None:
        print(api_key_flag_warning(provider), file=sys.stderr)
    elif args.api_key_file is not None:
        args.api_key = read_api_key_file(args.api_key_file)
    elif args.agent_dir_config is not None and provider != "faux":
        args.api_key = args.agent_dir_config.api_key(provider)
        args.agent_dir_key = args.api_key  # one key more than the stored ones
    if args.model_choice is not None:
        preflight(
            args.model_choice,
            base_url=args.base_url,
            api_key=args.api_key,
            agent_dir=args.agent_dir_config,
        )
    timeouts = settings.current.retry.provider
    if args.timeout is None:
        args.timeout = timeouts.timeout_ms / 1000
    if args.idle_timeout is None:
        args.idle_timeout = timeouts.idle_timeout_ms / 1000


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-session",
        description="LLM agent sessions on Trio, with structural retry cancellation.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="run an offline session that retries two 503s, then answers"
    )
    demo.add_argument("--json", action="store_true", help="print events as JSON lines")
    _settings_options(demo)

    chat = commands.add_parser("chat", help="chat with a model (a terminal UI on a TTY)")
    _provider_options(chat, default=None)
    _settings_options(chat)
    chat.add_argument("--system", metavar="TEXT", help="a system prompt")
    resume = chat.add_mutually_exclusive_group()
    resume.add_argument("--resume", metavar="PATH", help="continue the session in this file")
    resume.add_argument(
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the latest session of this directory",
    )
    resume.add_argument("--no-save", action="store_true", help="keep no session file")

    rpc = commands.add_parser(
        "rpc",
        help="serve sessions over JSON lines on stdin/stdout (see docs/rpc.md)",
        description="Read one JSON command per line on stdin; write responses and session "
        "events as JSON lines on stdout, as the reference's --mode rpc does.",
    )
    _provider_options(rpc, default=None)
    _settings_options(rpc)
    rpc.add_argument(
        "--session", metavar="FILE", help="resume this session file (created if missing)"
    )
    rpc.add_argument(
        "--session-dir",
        metavar="DIR",
        help="where new session files go (default: ours for the cwd)",
    )
    rpc.add_argument("--no-session", action="store_true", help="keep no session file")
    rpc.add_argument(
        "--lean-updates",
        action="store_true",
        help="write message_update events with deltas only, without the message so far "
        "(not the reference's shape; see docs/rpc.md)",
    )

    conformance = commands.add_parser(
        "conformance",
        help="check an RPC agent's retry policy against docs/spec.md (see docs/conformance.md)",
        description="Start a scripted loopback LLM server, run the retry scenarios against "
        "the agent command given after '--' (it must speak pi's RPC protocol), and print "
        "one row per scenario. Exit status 0 only when every non-[beyond] rule holds.",
    )
    conformance.add_argument("--json", action="store_true", help="print the results as JSON")
    conformance.add_argument(
        "--only", metavar="NAME,…", help="run only these scenarios (comma-separated)"
    )
    conformance.add_argument(
        "agent_command", nargs="*", metavar="-- COMMAND", help="the agent, in RPC mode"
    )

    auth = commands.add_parser("auth", help="manage API keys in the credential store")
    actions = auth.add_subparsers(dest="auth", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="store a key (typed hidden, or one line of stdin)")
    add.add_argument("provider", help="openai, anthropic, or another provider name")
    add.add_argument("--label", help="a name for this key")
    actions.add_parser("list", help="list keys (never printed whole)")
    remove = actions.add_parser("remove", help="remove a key")
    remove.add_argument("provider")
    remove.add_argument("which", help="the key's label or its #index from 'auth list'")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trio-session`` command."""
    args = _parser().parse_args(argv)
    status = 2
    try:
        status = _run(args)
    except* (CommandError, TrioSessionError) as group:
        for exc in group.exceptions:
            print(f"trio-session: {exc}", file=sys.stderr)
        status = 2
    except* KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        status = 130
    except* BrokenPipeError:  # the reader went away (``trio-session demo | head``)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        status = 0
    return status


def _credentials_url(args: argparse.Namespace, settings: SettingsStore) -> str | None:
    """``--credentials``, else the settings' ``credentials.url``."""
    url: str | None = args.credentials or settings.current.credentials.url
    return url


def _agent_dir_path(args: argparse.Namespace) -> Path | None:
    config: AgentDirConfig | None = args.agent_dir_config
    return config.path if config is not None else None


def _models(args: argparse.Namespace, model: Model) -> tuple[Model, ...]:
    """The models ``set_model`` / ``cycle_model`` move between: the agent dir's, if any."""
    config: AgentDirConfig | None = args.agent_dir_config
    return available_models(config, model) if config is not None else ()


def _agent_dir(flag: str | None) -> AgentDirConfig | None:
    """pi's agent directory of ``--agent-dir`` or ``$PI_CODING_AGENT_DIR``, its warnings said."""
    path = agent_dir_from(flag)
    if path is None:
        return None
    if path.exists() and not path.is_dir():
        raise CommandError(f"--agent-dir {path}: not a directory")
    config = load_agent_dir(path, cwd=Path.cwd())
    for warning in config.warnings:
        print(f"trio-session: warning: {warning}", file=sys.stderr)
    return config


def _conformance(args: argparse.Namespace) -> int:
    from .conformance import run_command  # the kit loads only for this command

    command = list(args.agent_command)
    if command[:1] == ["--"]:
        command = command[1:]
    only = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    try:
        return run_command(command, only, args.json, sys.stdout)
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    if args.command == "auth":
        return run_auth(args)
    if args.command == "conformance":
        return _conformance(args)
    # pi's agent directory is for chat and rpc only; the demo reads nothing of the user's.
    args.agent_dir_config = _agent_dir(args.agent_dir) if args.command != "demo" else None
    # The demo is the same everywhere: only --settings files, never the user's own.
    settings = load_settings(
        args.settings,
        defaults=args.command != "demo",
        ignore_broken=args.ignore_broken_settings,
        agent_dir=args.agent_dir_config,
    )
    if args.command == "demo":
        extensions = _extensions(args.extension)
        interactive = _is_terminal() and not args.json

        async def demo() -> int:
            return await run_demo(
                sys.stdout,
                as_json=args.json,
                settings=settings,
                extensions=extensions,
                interactive=interactive,
            )

        return trio.run(demo)
    _provider_inputs(args, settings)
    runner: Any = run_chat if args.command == "chat" else run_rpc
    status: int = trio.run(runner, args, settings)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
