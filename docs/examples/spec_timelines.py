"""Print the timelines of docs/spec.md, from real runs on a mock clock.

Each scenario scripts a ``FauxProvider`` and runs a real ``AgentSession`` on
Trio's ``MockClock``, so backoff sleeps take no real time and every printed
time is exact. The event lines are the JSON objects an RPC client would read
(``event_to_json``) as ``key: value`` pairs, with the bulky ``message`` /
``messages`` fields cut to what matters here. Run it with
``python docs/examples/spec_timelines.py`` (or name one scenario:
``python docs/examples/spec_timelines.py abort``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from trio_session import (
    AgentSession,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    Model,
    SessionEvent,
    Usage,
    event_to_json,
    open_session,
)

#: message_update is one line per streamed chunk; it says nothing about retry.
HIDDEN = {"message_update", "message_start", "turn_start"}
#: Lines fit a docs page's code block.
WIDTH = 80
OVERLOADED = "503 Service Unavailable"
OVERFLOW = "prompt is too long: 1200 tokens > 1000 maximum"


def _fields(event: SessionEvent) -> list[str]:
    """The event's JSON fields as ``key: value`` pairs, type and bulk left out.

    A message is shown by its role and stopReason; ``agent_end``'s list of the
    run's messages is left out, as is the detail of a compaction result.
    """
    fields = event_to_json(event)
    fields.pop("type")
    fields.pop("messages", None)
    fields.pop("toolResults", None)
    message = fields.pop("message", None)
    pairs = []
    if isinstance(message, dict):
        pairs.append(str(message["role"]))
        if "stopReason" in message:
            pairs.append(f"stopReason: {json.dumps(message['stopReason'])}")
    result = fields.get("result")
    if isinstance(result, dict):
        fields["result"] = {
            "summary": result["summary"],
            "tokensBefore": result["tokensBefore"],
        }
    pairs += [
        f"{key}: {json.dumps(value, ensure_ascii=False)}"
        for key, value in fields.items()
    ]
    return pairs


def _printer(session: AgentSession) -> None:
    def show(event: SessionEvent) -> None:
        if event.type not in HIDDEN:
            head = f"t={trio.current_time():5.1f}s  {event.type:<17} "
            lines = [head]
            for i, pair in enumerate(_fields(event)):
                if (
                    i and len(lines[-1]) + len(pair) + 2 > WIDTH
                ):  # wrap between pairs
                    lines[-1] += ","
                    lines.append(" " * len(head))
                elif i:
                    lines[-1] += ", "
                lines[-1] += pair
            print("\n".join(line.rstrip() for line in lines))

    session.subscribe(show)


async def two_503s_then_success() -> None:
    """Defaults (maxRetries 3, baseDelayMs 2000): 503, 503, then an answer."""
    provider = FauxProvider(
        [
            FauxReply(error=OVERLOADED),
            FauxReply(error=OVERLOADED),
            FauxReply(text="Hello!"),
        ]
    )
    async with open_session(provider) as session:
        _printer(session)
        reply = await session.prompt("Say hello")
        print(
            f"t={trio.current_time():5.1f}s  "
            f"prompt() returns {reply.stop_reason!r}"
        )


async def max_retries_exceeded() -> None:
    """Defaults: four 503s in a row; the fourth exceeds maxRetries."""
    provider = FauxProvider([FauxReply(error=OVERLOADED)] * 4)
    async with open_session(provider) as session:
        _printer(session)
        reply = await session.prompt("Say hello")
        print(
            f"t={trio.current_time():5.1f}s  "
            f"prompt() returns {reply.stop_reason!r}"
            f" ({reply.error_message!r})"
        )
        print(f"requests sent: {len(provider.requests)}")


async def abort_during_backoff() -> None:
    """Defaults: one 503, then ``abort_retry()`` 1.5 s into the 2 s backoff."""
    provider = FauxProvider(
        [FauxReply(error=OVERLOADED), FauxReply(text="never sent")]
    )
    async with (
        open_session(provider) as session,
        trio.open_nursery() as nursery,
    ):
        _printer(session)
        started = trio.Event()
        session.subscribe(
            lambda e: started.set() if e.type == "auto_retry_start" else None
        )

        async def user() -> None:
            await started.wait()
            await trio.sleep(1.5)
            print(f"t={trio.current_time():5.1f}s  session.abort_retry()")
            session.abort_retry()

        nursery.start_soon(user)
        reply = await session.prompt("Say hello")
        print(
            f"t={trio.current_time():5.1f}s  "
            f"prompt() returns {reply.stop_reason!r}"
        )
        print(f"requests sent: {len(provider.requests)}")


async def abort_during_reattempt() -> None:
    """Defaults: one 503; the re-attempt streams and hangs; ``abort_retry()``
    1 s in."""
    provider = FauxProvider(
        [FauxReply(error=OVERLOADED), FauxReply(text="never", hang=True)]
    )
    async with (
        open_session(provider) as session,
        trio.open_nursery() as nursery,
    ):
        _printer(session)
        reattempt = trio.Event()
        session.subscribe(
            lambda e: (
                reattempt.set()
                if e.type == "agent_start" and session.is_retrying
                else None
            )
        )

        async def user() -> None:
            await reattempt.wait()
            await trio.sleep(1)
            print(f"t={trio.current_time():5.1f}s  session.abort_retry()")
            session.abort_retry()

        nursery.start_soon(user)
        reply = await session.prompt("Say hello")
        print(
            f"t={trio.current_time():5.1f}s  "
            f"prompt() returns {reply.stop_reason!r}"
        )


async def overflow_then_compaction() -> None:
    """An overflow error: never retried; compacted, then run once more."""
    model = Model(id="small", provider="faux", context_window=1000)
    provider = FauxProvider(
        [
            FauxReply(text="a1", usage=Usage(input=400, output=20)),
            FauxReply(error=OVERFLOW),
            FauxReply(
                text="the summary"
            ),  # the default compactor's summary request
            FauxReply(text="a2"),
        ]
    )
    async with open_session(provider, model) as session:
        await session.prompt("q1")
        _printer(session)
        reply = await session.prompt("q2")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.text!r}")


async def follow_up_during_backoff() -> None:
    """A follow-up queued while the chain sleeps: queue_update, then sent."""
    provider = FauxProvider(
        [
            FauxReply(error=OVERLOADED),
            FauxReply(text="a1"),
            FauxReply(text="a2"),
        ]
    )
    async with (
        open_session(provider) as session,
        trio.open_nursery() as nursery,
    ):
        _printer(session)
        started = trio.Event()
        session.subscribe(
            lambda e: started.set() if e.type == "auto_retry_start" else None
        )

        async def user() -> None:
            await started.wait()
            print(
                f"t={trio.current_time():5.1f}s  session.follow_up('and then?')"
            )
            session.follow_up("and then?")

        nursery.start_soon(user)
        reply = await session.prompt("q1")
        print(f"t={trio.current_time():5.1f}s  prompt() returns {reply.text!r}")


USAGE_LIMIT = "429 usage_limit_reached"


async def usage_limit_no_key_left(profile: str) -> None:
    """One key hits its usage limit: the seed waits, pi-1.6 ends (R-55)."""
    provider = FauxProvider(
        [FauxReply(error=USAGE_LIMIT), FauxReply(text="Hello!")]
    )
    store = InMemoryCredentialStore(
        keys={"faux": ["only"]}, clock=trio.current_time
    )
    settings = {"retry": {"profile": profile}}
    async with open_session(
        provider, settings=settings, credentials=store
    ) as session:
        _printer(session)
        reply = await session.prompt("Say hello")
        now = trio.current_time()
        print(f"t={now:5.1f}s  prompt() returns {reply.stop_reason!r}")
        print(f"requests sent: {len(provider.requests)}")


async def long_base_delay(profile: str) -> None:
    """baseDelayMs 40 000, 503 thrice, then an answer; pi-1.6 caps (R-53a)."""
    provider = FauxProvider(
        [FauxReply(error=OVERLOADED)] * 3 + [FauxReply(text="Hello!")]
    )
    settings = {"retry": {"profile": profile, "baseDelayMs": 40_000}}
    async with open_session(provider, settings=settings) as session:
        _printer(session)
        reply = await session.prompt("Say hello")
        now = trio.current_time()
        print(f"t={now:5.1f}s  prompt() returns {reply.stop_reason!r}")


def _in(
    profile: str, scenario: Callable[[str], Awaitable[None]]
) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        await scenario(profile)

    return run


SCENARIOS: dict[str, Callable[[], Awaitable[None]]] = {
    "success": two_503s_then_success,
    "exceeded": max_retries_exceeded,
    "abort": abort_during_backoff,
    "abort_reattempt": abort_during_reattempt,
    "overflow": overflow_then_compaction,
    "queue": follow_up_during_backoff,
    "usage_limit_seed": _in("seed", usage_limit_no_key_left),
    "usage_limit_pi16": _in("pi-1.6", usage_limit_no_key_left),
    "long_delay_seed": _in("seed", long_base_delay),
    "long_delay_pi16": _in("pi-1.6", long_base_delay),
}


def main(names: list[str]) -> None:
    for name in names or list(SCENARIOS):
        scenario = SCENARIOS[name]
        print(f"## {name}")
        trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
