"""The ``trio-session`` command. The only place that parses ``argv``."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import TextIO

import trio

from . import __version__
from ._codec import event_to_json
from ._errors import SettingsError
from ._events import (
    AutoCompactionEnd,
    AutoCompactionStart,
    AutoRetryEnd,
    AutoRetryStart,
    MessageEnd,
    MessageUpdate,
    SessionEvent,
)
from ._messages import AssistantMessage, UserMessage
from ._session import EventStream, open_session
from ._settings import SettingsStore
from .providers._base import Model
from .providers._faux import FauxProvider, FauxReply

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
            if not self.streaming:
                self.write("assistant: ")
                self.streaming = True
            self.write(event.delta)
        elif isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, UserMessage):
                self.write(f"you: {message.content}\n")
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
        elif isinstance(event, AutoCompactionStart):
            self.write(f"  ⇣ compacting the context ({event.reason})\n")
        elif isinstance(event, AutoCompactionEnd):
            done = "done" if event.result is not None else "nothing to compact"
            self.write(f"  ⇣ compaction {'aborted' if event.aborted else done}\n")

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


async def run_demo(
    out: TextIO, *, as_json: bool = False, settings: SettingsStore | None = None
) -> int:
    """An offline session on the faux provider: two 503s, then an answer."""
    provider = FauxProvider(demo_script())
    model = Model(id="faux-demo", provider="faux", context_window=32_000)
    printer = _Printer(out)
    if not as_json:
        printer.write(
            "trio-session demo: an offline session whose provider fails twice with 503,\n"
            "then answers. Watch the retry policy at work (Ctrl+C to stop).\n\n"
        )
    async with open_session(provider, model, settings=settings) as session:
        with session.events() as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_show, events, printer, as_json)
                reply = await session.prompt(DEMO_PROMPT)
                await session.aclose()  # ends the event stream, so _show returns
    return 0 if reply.stop_reason == "stop" else 1


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
    demo.add_argument(
        "--settings",
        metavar="FILE",
        action="append",
        default=[],
        help="a settings JSON file (repeatable; later files win)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trio-session`` command."""
    args = _parser().parse_args(argv)
    try:
        settings = SettingsStore.from_files(*args.settings)
    except SettingsError as exc:
        print(f"trio-session: {exc}", file=sys.stderr)
        return 2
    status = 2
    try:
        if args.command == "demo":
            status = trio.run(lambda: run_demo(sys.stdout, as_json=args.json, settings=settings))
    except* KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        status = 130
    except* BrokenPipeError:  # the reader went away (``trio-session demo | head``)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        status = 0
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
