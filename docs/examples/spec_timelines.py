"""Print the timelines of docs/spec.md, from real runs on a mock clock.

Each scenario scripts a ``FauxProvider`` and runs a real ``AgentSession`` on
Trio's ``MockClock``, so backoff sleeps take no real time and every printed
time is exact. The event lines are the JSON objects an RPC client would read
(``event_to_json``), with the bulky ``message`` / ``messages`` fields cut to the
fields that matter here. Run it with ``python docs/examples/spec_timelines.py``
(or name one scenario: ``python docs/examples/spec_timelines.py abort``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing

from trio_session import (
    AgentSession,
    FauxProvider,
    FauxReply,
    Model,
    SessionEvent,
    Usage,
    event_to_json,
    open_session,
)

#: message_update is one line per streamed chunk; it says nothing about retry.
HIDDEN = {"message_update", "message_start", "turn_start"}
OVERLOADED = "503 Service Unavailable"
OVERFLOW = "prompt is too long: 1200 tokens > 1000 maximum"


def _short(fields: dict[str, Any]) -> dict[str, Any]:
    """The event's JSON without its type, messages cut to role and stopReason."""
    out = dict(fields)
    out.pop("type")
    message = out.pop("message", None)
    if isinstance(message, dict):
        brief = {"role": message.get("role"), "stopReason": message.get("stopReason")}
        out["message"] = {k: v for k, v in brief.items() if v is not None}
    if "messages" in out:
        count = len(out["messages"])
        out["messages"] = f"[{count} message{'s' if count != 1 else ''}]"
    out.pop("toolResults", None)
    result = out.get("result")
    if isinstance(result, dict):
        out["result"] = {k: result[k] for k in ("summary", "tokensBefore") if k in result}
    return out


def _printer(session: AgentSession) -> None:
    def show(event: SessionEvent) -> None:
        if event.type not in HIDDEN:
            short = _short(event_to_json(event))
            fields = json.dumps(short, ensure_ascii=False) if short else ""
            print(f"t={trio.current_time():5.1f}s  {event.type:<16} {fields}".rstrip())

    session.subscribe(show)


async def two_503s_then_success() -> None:
    """Defaults (maxRetries 3, baseDelayMs 2000): 503, 503, then an answer."""
    provider = FauxProvider(
        [FauxReply(error=OVERLOADED), FauxReply(error=OVERLOADED), FauxReply(text="Hello!")]
    )
    async with open_session(provider) as session:
        _printer(session)
        reply = await session.prompt("Say hello")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.stop_reason!r}")


async def max_retries_exceeded() -> None:
    """Defaults: four 503s in a row; the fourth exceeds maxRetries."""
    provider = FauxProvider([FauxReply(error=OVERLOADED)] * 4)
    async with open_session(provider) as session:
        _printer(session)
        reply = await session.prompt("Say hello")
        print(
            f"t={trio.current_time():5.1f}s  prompt() returns {reply.stop_reason!r}"
            f" ({reply.error_message!r})"
        )
        print(f"requests sent: {len(provider.requests)}")


async def abort_during_backoff() -> None:
    """Defaults: one 503, then ``abort_retry()`` 1.5 s into the 2 s backoff sleep."""
    provider = FauxProvider([FauxReply(error=OVERLOADED), FauxReply(text="never sent")])
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        _printer(session)
        started = trio.Event()
        session.subscribe(lambda e: started.set() if e.type == "auto_retry_start" else None)

        async def user() -> None:
            await started.wait()
            await trio.sleep(1.5)
            print(f"t={trio.current_time():5.1f}s  session.abort_retry()")
            session.abort_retry()

        nursery.start_soon(user)
        reply = await session.prompt("Say hello")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.stop_reason!r}")
        print(f"requests sent: {len(provider.requests)}")


async def abort_during_reattempt() -> None:
    """Defaults: one 503; the re-attempt streams and hangs; ``abort_retry()`` 1 s in."""
    provider = FauxProvider([FauxReply(error=OVERLOADED), FauxReply(text="never", hang=True)])
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        _printer(session)
        reattempt = trio.Event()
        session.subscribe(
            lambda e: reattempt.set() if e.type == "agent_start" and session.is_retrying else None
        )

        async def user() -> None:
            await reattempt.wait()
            await trio.sleep(1)
            print(f"t={trio.current_time():5.1f}s  session.abort_retry()")
            session.abort_retry()

        nursery.start_soon(user)
        reply = await session.prompt("Say hello")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.stop_reason!r}")


async def overflow_then_compaction() -> None:
    """An overflow error: never retried; compacted, then the run continues once."""
    model = Model(id="small", provider="faux", context_window=1000)
    provider = FauxProvider(
        [
            FauxReply(text="a1", usage=Usage(input=400, output=20)),
            FauxReply(error=OVERFLOW),
            FauxReply(text="the summary"),  # the default compactor's summary request
            FauxReply(text="a2"),
        ]
    )
    async with open_session(provider, model) as session:
        await session.prompt("q1")
        _printer(session)
        reply = await session.prompt("q2")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.text!r}")


async def follow_up_during_backoff() -> None:
    """A follow-up queued while the chain sleeps: queue_update, then delivered."""
    provider = FauxProvider(
        [FauxReply(error=OVERLOADED), FauxReply(text="a1"), FauxReply(text="a2")]
    )
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        _printer(session)
        started = trio.Event()
        session.subscribe(lambda e: started.set() if e.type == "auto_retry_start" else None)

        async def user() -> None:
            await started.wait()
            print(f"t={trio.current_time():5.1f}s  session.follow_up('and then?')")
            session.follow_up("and then?")

        nursery.start_soon(user)
        reply = await session.prompt("q1")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.text!r}")


SCENARIOS: dict[str, Callable[[], Awaitable[None]]] = {
    "success": two_503s_then_success,
    "exceeded": max_retries_exceeded,
    "abort": abort_during_backoff,
    "abort_reattempt": abort_during_reattempt,
    "overflow": overflow_then_compaction,
    "queue": follow_up_during_backoff,
}


def main(names: list[str]) -> None:
    for name in names or list(SCENARIOS):
        scenario = SCENARIOS[name]
        print(f"## {name}")
        trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
