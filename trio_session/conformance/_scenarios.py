"""The scenarios: each scripts the loopback server, drives the agent, and checks rules.

A scenario's checks each name the rules of docs/spec.md they test (see ``_checks`` for
the tolerances on timing and how a [beyond] rule is reported).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from .._core.classes import frozen
from ._agent import Observed, text_of
from ._checks import QUIET, RUN_TIMEOUT, SLACK, Run, requests
from ._server import Hang, HttpError, Step, Stream, error_body


def _assistants(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(m.get("stopReason")) for m in messages if m.get("role") == "assistant"]


# -- the scenarios ------------------------------------------------------------------------


Driver = Callable[[Run], Awaitable[None]]


@frozen
class Scenario:
    """A named scenario: its rules, the server's script, the retry settings, the driver."""

    name: str
    rules: tuple[str, ...]
    beyond_rules: tuple[str, ...]
    expected: str
    script: tuple[Step, ...]
    drive: Driver
    retry: Mapping[str, Any] = attrs.field(factory=dict)
    fallback: Step | None = None
    #: The agent's keys (``start_agent``); none: the kit's one key.
    keys: tuple[str, ...] = ()
    #: The server's answer to a request carrying a key, whatever the script says.
    keyed: Mapping[str, Step] = attrs.field(factory=dict)
    #: The profiles it runs under (``--profile``), and what it expects under pi-1.6 when
    #: that differs from ``expected``.
    profiles: tuple[str, ...] = ("seed", "pi-1.6")
    expected_pi16: str | None = None
    #: The server's steps by prompt (``LoopbackLLM.by_prompt``).
    by_prompt: Mapping[str, Sequence[Step]] = attrs.field(factory=dict)
    #: The [beyond] rules under pi-1.6 when they differ from ``beyond_rules``.
    beyond_pi16: tuple[str, ...] | None = None
    #: ``compaction.enabled`` and ``compaction.keepRecentTokens`` in the agent's settings.
    compaction: bool = True
    keep_recent_tokens: int = 1
    #: Rows of their own, each with its expectation: the scenario runs once (one agent)
    #: and yields one result per row, from the checks marked with its name.
    rows: tuple[tuple[str, str], ...] = ()
    #: The scenario with only some of its ``rows`` (``--only``).
    narrow: Callable[[Sequence[str]], Scenario] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The names of its results: its rows', or its own."""
        return tuple(row for row, _ in self.rows) or (self.name,)

    def beyond(self, profile: str) -> tuple[str, ...]:
        """The scenario's [beyond] rules under ``profile``."""
        if profile == "pi-1.6" and self.beyond_pi16 is not None:
            return self.beyond_pi16
        return self.beyond_rules

    def expectation(self, profile: str) -> str:
        """What the scenario expects under ``profile``."""
        return self.expected_pi16 if profile == "pi-1.6" and self.expected_pi16 else self.expected

    @property
    def base_delay_ms(self) -> int:
        """The scenario's ``retry.baseDelayMs``."""
        return int(self.retry.get("baseDelayMs", 100))


def _http(status: int, message: str, *headers: tuple[str, str]) -> HttpError:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return HttpError(status, error_body(message, kind), tuple(headers))


UNAVAILABLE = _http(503, "Service Unavailable")


async def _two_503(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    run.expect_retries(start, "R-19, R-23", ["start(1/3,500ms)", "start(2/3,1000ms)", "end(ok,2)"])
    run.expect_requests(3)
    run.expect_spacing(start)
    order = [
        "message_end(assistant,stop)" if e.type == "message_end" else e.type
        for e in run.events(start, "message_end", "auto_retry_end", "turn_end", "agent_end")
        if e.type != "message_end" or _is_reply(e)
    ]
    tail = order[-4:]
    want = ["message_end(assistant,stop)", "auto_retry_end", "turn_end", "agent_end"]
    run.check("R-23a", " → ".join(want), " → ".join(tail), tail == want)
    messages = await run.messages()
    stops = _assistants(messages)
    run.check(
        "R-20",
        "context: the answer only, no 503 errors",
        f"assistant stopReasons {stops}",
        stops == ["stop"],
    )
    ends = [e.event.get("willRetry") for e in run.events(start, "agent_end")]
    run.check(
        "R-45a",
        "agent_end willRetry true, true, false",
        f"willRetry {ends}",
        ends == [True, True, False],
        beyond=True,
    )


def _is_reply(observed: Observed) -> bool:
    message = observed.event.get("message")
    return (
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and message.get("stopReason") == "stop"
    )


async def _exceeded(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    run.expect_retries(
        start,
        "R-15, R-27",
        ["start(1/2,100ms)", "start(2/2,200ms)", "end(fail,2,'*503*')"],
    )
    run.expect_requests(3)
    stops = _assistants(await run.messages())
    run.check(
        "R-15a",
        "the last error stays in the context",
        f"assistant stopReasons {stops}",
        bool(stops) and stops[-1] == "error",
    )


def _cancel_in_backoff(command: str, rules: str) -> Driver:
    async def drive(run: Run) -> None:
        start = await run.prompt("Say hello.")
        announced = await run.agent.wait_for(lambda e: e.type == "auto_retry_start", RUN_TIMEOUT)
        if announced is None:
            run.check(rules, "auto_retry_start", "none", False)
            return
        response = await run.agent.send({"type": command})
        run.check(
            "R-39",
            f"{command} answers success",
            str(response.get("success")),
            response.get("success") is True,
        )
        await run.settle(start)
        # No second request may come, not even once the announced delay is over.
        delay = float(announced.event.get("delayMs") or 0) / 1000
        await trio.sleep_until(announced.time + delay + QUIET)
        run.expect_retries(start, rules, ["start(1/3,1000ms)", "end(fail,1,'Retry cancelled')"])
        run.expect_requests(1, rules)

    return drive


async def _disabled(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    run.expect_retries(start, "R-12", [])
    run.expect_requests(1, "R-12")
    stops = _assistants(await run.messages())
    run.check(
        "R-15a",
        "the error stays in the context",
        f"assistant stopReasons {stops}",
        stops == ["error"],
    )


async def _not_retried(run: Run) -> None:
    start = await run.prompt("First question.")
    await run.settle(start)
    second = await run.prompt("Second question.")
    await run.settle(second)
    run.expect_retries(start, "R-4", [])
    run.expect_requests(2, "R-4")


def _retried_once(rules: str) -> Driver:
    async def drive(run: Run) -> None:
        start = await run.prompt("Say hello.")
        await run.settle(start)
        run.expect_retries(start, rules, ["start(1/3,100ms)", "end(ok,1)"])
        run.expect_requests(2, rules)
        run.expect_spacing(start)

    return drive


async def _overflow(run: Run) -> None:
    first = await run.prompt("First question.")
    await run.settle(first)
    start = await run.prompt("Second question.")
    await run.settle(start)
    run.expect_retries(start, "R-2", [])
    compaction = [
        f"{e.type}({e.event.get('reason')})"
        for e in run.events(start, "compaction_start", "compaction_end")
    ]
    want = ["compaction_start(overflow)", "compaction_end(overflow)"]
    run.check(
        "R-50", " → ".join(want), " → ".join(compaction) or "no compaction", compaction == want
    )
    replies = [e for e in run.events(start, "message_end") if _is_reply(e)]
    run.check(
        "R-50", "the run continues once: an answer", f"{len(replies)} answers", len(replies) == 1
    )
    run.expect_summary_requests(start, "R-50", "First question.")
    run.expect_final_error(start, "R-50", None)


async def _state_in_retry(run: Run) -> None:
    start = await run.prompt("Say hello.")
    announced = await run.agent.wait_for(lambda e: e.type == "auto_retry_start", RUN_TIMEOUT)
    during = await run.state() if announced is not None else {}
    await run.settle(start)
    after = await run.state()
    run.expect_retries(start, "R-19, R-23", ["start(1/3,1000ms)", "end(ok,1)"])
    fields = ("autoRetryEnabled", "isRetrying", "retryAttempt")
    seen = {k: during.get(k) for k in fields}
    run.check(
        "R-41",
        "during the backoff: autoRetryEnabled true, isRetrying true, retryAttempt 1",
        str(seen),
        seen == dict(zip(fields, (True, True, 1), strict=True)),
        beyond=True,
    )
    seen = {k: after.get(k) for k in fields}
    run.check(
        "R-41, R-23",
        "afterwards: isRetrying false, retryAttempt 0",
        str(seen),
        seen == dict(zip(fields, (True, False, 0), strict=True)),
        beyond=True,
    )


async def _retry_after(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    run.expect_retries(start, "R-16, R-26", ["start(1/3,100ms)", "end(ok,1)"])
    run.expect_requests(2)
    starts = run.events(start, "auto_retry_start")
    error = str(starts[0].event.get("errorMessage", "")) if starts else ""
    run.check(
        "R-52",
        "errorMessage carries the retry-after hint",
        repr(error[:80]),
        "retry-after" in error.lower(),
        beyond=True,
    )


async def _prompt_in_backoff(run: Run) -> None:
    start = await run.prompt("Say hello.")
    announced = await run.agent.wait_for(lambda e: e.type == "auto_retry_start", RUN_TIMEOUT)
    response = await run.agent.send({"type": "prompt", "message": "And then?"})
    await run.settle(start)
    if announced is not None:
        delay = float(announced.event.get("delayMs") or 0) / 1000
        await trio.sleep_until(announced.time + delay + QUIET)
        await run.settle(start)
    depth, worst = 0, 0
    for e in run.events(start, "agent_start", "agent_end"):
        depth += 1 if e.type == "agent_start" else -1
        worst = max(worst, depth)
    run.check(
        "R-36",
        "runs never interleave (agent_start/agent_end alternate)",
        f"at most {worst} runs at once",
        worst <= 1,
    )
    # [beyond] docs/rpc.md: a prompt during a backoff sleep joins the retry — the rest of
    # the sleep is skipped and the re-attempt carries it, in the same run.
    bodies = [r.body for r in run.server.requests]
    carried = [
        "And then?" in _user_texts(body) and "Say hello." in _user_texts(body) for body in bodies
    ]
    joined = response.get("success") is True and carried == [False, True]
    observed = (
        f"{'accepted' if response.get('success') else 'refused'}; {len(bodies)} requests, "
        f"carrying both prompts: {carried}; {len(run.events(start, 'agent_start'))} runs"
    )
    run.check(
        "R-36",
        "the prompt joins the retry: 2 requests, the re-attempt carries both prompts",
        observed,
        joined,
        beyond=True,
    )


def _user_texts(body: Any) -> list[str]:
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return []
    return [text_of(m) for m in messages if isinstance(m, dict) and m.get("role") == "user"]


async def _drop(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    run.expect_retries(start, "R-52", ["start(1/3,100ms)", "end(ok,1)"], beyond=True)
    run.expect_requests(2, "R-52", beyond=True)


async def _abort_reattempt(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.server.wait_for_requests(2)
    streaming = await run.agent.wait_for(
        lambda e: (
            e.type == "message_update" and "Thinking" in text_of(e.event.get("message") or {})
        ),
        RUN_TIMEOUT,
    )
    response = await run.agent.send({"type": "abort_retry"})
    run.check(
        "R-39",
        "abort_retry answers success",
        str(response.get("success")),
        response.get("success") is True,
    )
    ended = await run.agent.settle(start, QUIET, 3.0)
    hung_up = False
    with trio.move_on_after(SLACK):
        await run.server.wait_for_hang_up()
        hung_up = True
    run.check(
        "R-31",
        "the server sees the re-attempt's request hung up",
        "hung up" if hung_up else f"still open after {SLACK:g} s",
        hung_up,
        beyond=True,
    )
    if not ended:
        await run.agent.send({"type": "abort"})  # the reference streams on: stop it here
        await run.agent.settle(start, QUIET, RUN_TIMEOUT)
    run.expect_retries(
        start, "R-31", ["start(1/3,100ms)", "end(fail,1,'Retry cancelled')"], beyond=True
    )
    stops = [
        str(e.event["message"].get("stopReason"))
        for e in run.events(start, "message_end")
        if isinstance(e.event.get("message"), dict)
        and e.event["message"].get("role") == "assistant"
    ]
    run.check(
        "R-31",
        "the re-attempt ends aborted, by abort_retry alone",
        f"assistant stopReasons {stops}, {'by abort_retry' if ended else 'needed abort'}",
        ended and stops[-1:] == ["aborted"] and streaming is not None,
        beyond=True,
    )


#: The two keys of ``usage-limit-second-key``: they never leave the machine, and the
#: kit shows them only as ``key A`` / ``key B``.
KEY_A = "conformance-key-a"
KEY_B = "conformance-key-b"
USAGE_LIMIT = HttpError(
    429,
    error_body(
        "You have hit your usage limit (usage_limit_reached). retry-after: 600",
        "usage_limit_reached",
        "usage_limit_reached",
    ),
    (("retry-after", "600"),),
)


def key_label(key: str | None) -> str:
    """``key A``, ``key B``, ``another key`` or ``no key``: a request's key, never shown."""
    if key is None:
        return "no key"
    return {KEY_A: "key A", KEY_B: "key B"}.get(key, "another key")


async def _second_key(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    keys = [key_label(r.key) for r in run.server.requests]
    if "key B" not in keys:
        run.not_tested = (
            "the agent never sent key B: it gives the kit no way to hand it a second key "
            "(a pi agent directory holds one apiKey per provider; the kit also puts both "
            "keys in trio-session's credential store)"
        )
    run.expect_retries(start, "R-17", ["start(1/3,0ms)", "end(ok,1)"])
    run.check(
        "R-17",
        "2 requests: key A (usage limit), then key B (the answer)",
        f"{requests(len(keys))}: {', '.join(keys) or 'none'}",
        keys == ["key A", "key B"],
    )
    run.expect_spacing(start, rules="R-17, R-21")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "two-503-then-success",
        ("R-16", "R-19", "R-20", "R-21", "R-23", "R-23a", "R-45a"),
        ("R-45a",),
        "start(1/3,500ms) start(2/3,1000ms) end(ok,2); 3 requests, 500 and 1000 ms apart",
        (UNAVAILABLE, UNAVAILABLE, Stream()),
        _two_503,
        {"maxRetries": 3, "baseDelayMs": 500},
    ),
    Scenario(
        "max-retries-exceeded",
        ("R-15", "R-15a", "R-27"),
        (),
        "start(1/2) start(2/2) end(fail,2,503…); 3 requests",
        (UNAVAILABLE, UNAVAILABLE, UNAVAILABLE),
        _exceeded,
        {"maxRetries": 2, "baseDelayMs": 100},
    ),
    Scenario(
        "abort-retry-in-backoff",
        ("R-29", "R-30", "R-39"),
        (),
        "start(1/3,1000ms) end(fail,1,'Retry cancelled'); 1 request",
        (UNAVAILABLE, Stream()),
        _cancel_in_backoff("abort_retry", "R-29, R-30"),
        {"maxRetries": 3, "baseDelayMs": 1000},
    ),
    Scenario(
        "abort-in-backoff",
        ("R-32", "R-30"),
        (),
        "start(1/3,1000ms) end(fail,1,'Retry cancelled'); 1 request",
        (UNAVAILABLE, Stream()),
        _cancel_in_backoff("abort", "R-32, R-30"),
        {"maxRetries": 3, "baseDelayMs": 1000},
    ),
    Scenario(
        "retry-disabled",
        ("R-12", "R-15a"),
        (),
        "no retry events; 1 request; the 503 stays in the context",
        (UNAVAILABLE, Stream()),
        _disabled,
        {"enabled": False, "maxRetries": 3, "baseDelayMs": 100},
    ),
    Scenario(
        "400-and-401-not-retried",
        ("R-4",),
        (),
        "no retry events; 2 requests",
        (
            _http(400, "Invalid value for 'temperature': expected a number."),
            _http(401, "Incorrect API key provided."),
        ),
        _not_retried,
        {"maxRetries": 3, "baseDelayMs": 100},
        fallback=Stream(),
    ),
    Scenario(
        "429-then-success",
        ("R-5", "R-16", "R-19", "R-23"),
        (),
        "start(1/3,100ms) end(ok,1); 2 requests",
        (_http(429, "Rate limit reached for requests."), Stream()),
        _retried_once("R-5, R-19, R-23"),
        {"maxRetries": 3, "baseDelayMs": 100},
    ),
    Scenario(
        "context-overflow",
        ("R-2", "R-50"),
        (),
        "no retry events; compaction_start(overflow) → compaction_end; one answer",
        (
            Stream("The first answer."),
            _http(
                400,
                "This model's maximum context length is 32000 tokens. However, your "
                "messages resulted in 40000 tokens. Please reduce the length of the messages.",
            ),
        ),
        _overflow,
        {"maxRetries": 3, "baseDelayMs": 100},
        fallback=Stream("Summary: the user asked two questions."),
    ),
    Scenario(
        "get-state-during-retry",
        ("R-19", "R-23", "R-41"),
        ("R-41",),
        "get_state in the backoff: isRetrying true, retryAttempt 1; afterwards 0",
        (UNAVAILABLE, Stream()),
        _state_in_retry,
        {"maxRetries": 3, "baseDelayMs": 1000},
    ),
    Scenario(
        "retry-after",
        ("R-16", "R-26", "R-52"),
        ("R-52",),
        "delayMs stays exponential (100 ms: retry.respectRetryAfter is off); hint visible",
        (
            HttpError(
                503, error_body("Service Unavailable", "server_error"), (("retry-after", "1"),)
            ),
            Stream(),
        ),
        _retry_after,
        {"maxRetries": 3, "baseDelayMs": 100},
    ),
    Scenario(
        "400-mentioning-500",
        ("R-4", "R-5"),
        (),
        "retried: the reference pattern finds '500' anywhere in the text (R-5)",
        (
            _http(400, "Invalid 'max_tokens': expected at most 4096, got 500 too many."),
            Stream(),
        ),
        _retried_once("R-5"),
        {"maxRetries": 3, "baseDelayMs": 100},
    ),
    Scenario(
        "prompt-in-backoff",
        ("R-36",),
        ("R-36",),
        "runs never interleave; [beyond] the prompt joins the retry (docs/rpc.md)",
        (UNAVAILABLE, Stream(), Stream()),
        _prompt_in_backoff,
        {"maxRetries": 3, "baseDelayMs": 1000},
        fallback=Stream(),
    ),
    Scenario(
        "mid-stream-drop",
        ("R-52",),
        ("R-52",),
        "a dropped stream is a connection error, retried: start(1/3) end(ok,1)",
        (Stream("Hello there, this reply is cut", drop="close"), Stream()),
        _drop,
        {"maxRetries": 3, "baseDelayMs": 100},
    ),
    Scenario(
        "abort-retry-in-reattempt",
        ("R-31", "R-39"),
        ("R-31",),
        "abort_retry cancels the streaming re-attempt: aborted, end(fail,'Retry cancelled')",
        (UNAVAILABLE, Hang()),
        _abort_reattempt,
        {"maxRetries": 3, "baseDelayMs": 100},
    ),
    Scenario(
        "usage-limit-second-key",
        ("R-17", "R-21"),
        (),
        "key A's usage limit moves the session to key B at once: start(1/3,0ms) end(ok,1)",
        (),
        _second_key,
        {"maxRetries": 3, "baseDelayMs": 100},
        keys=(KEY_A, KEY_B),
        keyed={KEY_A: USAGE_LIMIT, KEY_B: Stream()},
    ),
)
