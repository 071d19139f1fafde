"""``trio-session demo``: an offline session on the faux provider, two 503s, then an answer.

Its own module, imported by the ``demo`` command alone: no other command loads the faux
provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

import trio

from .._core.messages import UserMessage
from .._session.extensions import Extension
from .._session.opening import open_session
from .._settings.store import SettingsStore
from ..providers._base import Model, ProviderRequest
from ..providers._faux import FauxProvider, FauxReply
from ._output import Printer, show

DEMO_PROMPT = "Say hello, and tell me what just happened."
DEMO_ANSWER = (
    "Hello! The provider answered 503 twice; the session waited 2 s, then 4 s, "
    "and retry 2 got through."
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


def _echo(request: ProviderRequest) -> FauxReply:
    """The demo's answer once its script is played: say what was heard."""
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    heard = users[-1].text if users else ""
    return FauxReply(text=f"(demo) You said: {heard}", delay=0.2)


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
            from ..tui._terminal_chat import run_terminal_chat

            await run_terminal_chat(
                session, first_prompt=DEMO_PROMPT, banner=banner + " (Esc cancels a retry)."
            )
            return 0
        printer = Printer(out)
        if not as_json:
            printer.write(banner + " (Ctrl+C to stop).\n\n")
        with session.events() as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(show, events, printer, as_json)
                reply = await session.prompt(DEMO_PROMPT)
                await session.aclose()  # ends the event stream, so show returns
    return 0 if reply.stop_reason == "stop" else 1
