"""The rows that came with the profiles (issue 29), and the classifier's rows.

Settlement (``agent_settled``) and ``data.disposition`` (R-54: pi 1.6.0's, so a rule under
pi-1.6 and [beyond] under the seed, whose reference has neither), the delay cap (R-53a),
never-retry (R-58), a usage limit with no key left (R-53b), an overflow with nothing to
compact (R-56a), the summary request's retry (R-56f); then one row per family of the
profile's classifier tables (``_texts``), each serving the family's texts one prompt at a
time to one agent, and listing the texts it got wrong.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ._agent import Observed
from ._checks import QUIET, RUN_TIMEOUT, Run
from ._scenarios import SCENARIOS, UNAVAILABLE, Driver, Scenario, _http
from ._server import HttpError, Step, Stream
from ._texts import PI_1_6_TEXTS, SEED_TEXTS, Text

OVERFLOW = _http(
    400,
    "This model's maximum context length is 32000 tokens. However, your "
    "messages resulted in 40000 tokens. Please reduce the length of the messages.",
)
QUOTA = _http(
    429,
    "You exceeded your current quota, please check your plan and billing details. "
    "(insufficient_quota)",
)
MONTHLY_LIMIT = _http(429, "Monthly usage limit reached for this plan.")


def _r54(run: Run) -> bool:
    """R-54's features are pi 1.6.0's: a rule under pi-1.6, [beyond] under the seed."""
    return run.profile == "seed"


async def _settled(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    _expect_settled(run, start, aborted=False)
    second = await run.prompt("Then stop.")
    announced = await run.agent.wait_for(
        lambda e: e.type == "auto_retry_start", RUN_TIMEOUT, start=second
    )
    if announced is not None:
        await run.agent.send({"type": "abort"})
    await run.settle(second)
    _expect_settled(run, second, aborted=True)


def _expect_settled(run: Run, start: int, *, aborted: bool) -> None:
    events = run.events(start)
    ends = [i for i, e in enumerate(events) if e.type == "agent_end"]
    settled = [
        (i, e.event.get("aborted")) for i, e in enumerate(events) if e.type == "agent_settled"
    ]
    ok = len(settled) == 1 and bool(ends) and settled[0][0] > ends[-1] and settled[0][1] is aborted
    observed = ", ".join(
        f"agent_settled {{aborted: {a}}} {'after' if ends and i > ends[-1] else 'before'} "
        "the last agent_end"
        for i, a in settled
    )
    run.check(
        "R-54",
        f"one agent_settled {{aborted: {aborted}}}, after the last agent_end",
        observed or "no agent_settled",
        ok,
        beyond=_r54(run),
    )


async def _disposition(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    data = run.answers[0].get("data") if run.answers else None
    disposition = data.get("disposition") if isinstance(data, dict) else None
    run.check(
        "R-54",
        'the prompt\'s answer: data.disposition "started"',
        f"data.disposition {disposition!r}",
        disposition == "started",
        beyond=_r54(run),
    )


async def _delay_cap(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    want = [f"start(1/3,{run.formula(1)}ms)", f"start(2/3,{run.formula(2)}ms)", "end(ok,2)"]
    run.expect_retries(start, "R-19, R-23", want)
    run.expect_requests(3)
    run.expect_spacing(start)


def _retried_or_not(pi16_rule: str, seed_rule: str) -> Driver:
    """One prompt: under pi-1.6 not retried (``pi16_rule``), under the seed retried once
    after the exponential delay (``seed_rule``)."""

    async def drive(run: Run) -> None:
        start = await run.prompt("Say hello.")
        await run.settle(start)
        if run.profile == "pi-1.6":
            run.expect_retries(start, pi16_rule, [])
            run.expect_requests(1, pi16_rule)
            ends = [e.event.get("willRetry") for e in run.events(start, "agent_end")]
            run.check(
                "R-45a, R-56",
                "agent_end willRetry false",
                f"willRetry {ends}",
                ends == [False],
                beyond=True,
            )
        else:
            run.expect_retries(start, seed_rule, ["start(1/3,100ms)", "end(ok,1)"])
            run.expect_requests(2, seed_rule)

    return drive


async def _nothing_to_compact(run: Run) -> None:
    start = await run.prompt("Say hello.")
    await run.settle(start)
    run.expect_retries(start, "R-2", [])
    seed = run.profile == "seed"
    rule = "R-56g" if seed else "R-56a"  # the seed's is ours: pi 0.73.1 summarises nothing
    sent = sum(r.prompt() in run.prompts for r in run.server.requests)
    run.check(rule, "the prompt is sent once", f"sent {sent} times", sent == 1, beyond=seed)
    run.expect_summary_requests(start, rule, None, beyond=seed)
    compaction = [_compaction(e) for e in run.events(start, "compaction_start", "compaction_end")]
    want = (
        ["compaction_start(overflow)", "compaction_end(overflow, result None, willRetry False)"]
        if seed
        else []
    )
    run.check(
        rule,
        " → ".join(want) or "no compaction event",
        " → ".join(compaction) or "no compaction event",
        compaction == want,
        beyond=seed,
    )
    run.expect_final_error(start, rule, "maximum context length", beyond=seed)


def _compaction(observed: Observed) -> str:
    e = observed.event
    if observed.type == "compaction_start":
        return f"compaction_start({e.get('reason')})"
    reason, again = e.get("reason"), e.get("willRetry")
    result = "None" if e.get("result") is None else "given"
    return f"compaction_end({reason}, result {result}, willRetry {again})"


async def _summary_retry(run: Run) -> None:
    first = await run.prompt("First question.")
    await run.settle(first)
    start = await run.prompt("Second question.")
    await run.settle(start)
    run.expect_retries(start, "R-2", [])
    kinds = ("summarization_retry_scheduled", "summarization_retry_attempt_start")
    events = run.events(start, *kinds, "summarization_retry_finished")
    seen = [
        f"scheduled({e.event.get('attempt')}/{e.event.get('maxAttempts')},"
        f"{e.event.get('delayMs')}ms)"
        if e.type == kinds[0]
        else e.type.removeprefix("summarization_retry_")
        for e in events
    ]
    want = (
        [f"scheduled(1/3,{run.formula(1)}ms)", "attempt_start", "finished"]
        if run.profile == "pi-1.6"
        else []
    )
    run.check(
        "R-56f",
        " → ".join(want) or "no summarization_retry event",
        " → ".join(seen) or "no summarization_retry event",
        seen == want,
    )
    run.expect_summary_requests(start, "R-50", "First question.")
    # the seed falls back when its summary request fails ([beyond] R-56f); pi 0.73.1 fails
    run.expect_final_error(start, "R-56f", None, beyond=run.profile == "seed")


def _classify(rows: Sequence[tuple[str, Sequence[Text]]]) -> Driver:
    """Serve each text of each row in turn (one prompt each, one agent for all) and check,
    row by row, whether the agent retried each text as the profile says."""

    async def drive(run: Run) -> None:
        for row, texts in rows:
            wrong = []
            for number, text in enumerate(texts, 1):
                start = await run.prompt(_prompt(row, number))
                retried = await _retried(run, start, text.retried)
                if retried != text.retried:
                    said = "retried" if retried else "not retried"
                    wrong.append(f"{text.status} {text.text!r} ({text.pattern}): {said}")
            rules = "R-58" if run.profile == "pi-1.6" else ("R-5" if texts[0].retried else "R-7")
            if texts[0].family == "trap":
                rules = "R-58" if run.profile == "pi-1.6" else "R-5"
            count = sum(t.retried for t in texts)
            run.check(
                rules,
                f"{count} of {len(texts)} retried, as the profile's table says",
                "; ".join(wrong) or f"{len(texts)} of {len(texts)} as expected",
                not wrong,
                row=row,
            )

    return drive


def _prompt(row: str, number: int) -> str:
    return f"{row}: text {number}, please."


#: How long the kit waits for the retry of a text the profile retries, seconds.
RETRY_WAIT = 3.0


async def _retried(run: Run, start: int, expected: bool) -> bool:
    """Wait until the prompt begun at event ``start`` is over, and say whether a retry
    started. After its ``agent_end``: for a text the profile retries (``expected``), up
    to ``RETRY_WAIT`` for the ``auto_retry_start``, then its ``auto_retry_end`` and the
    ``agent_end`` after it; for another, a ``get_state`` (whatever the agent wrote at
    once after ``agent_end`` is in by its answer) and a short quiet, longer if a retry or
    a compaction started after all."""
    agent = run.agent
    await agent.wait_for(lambda e: e.type == "agent_end", RUN_TIMEOUT, start=start)
    if expected:
        begun = await agent.wait_for(
            lambda e: e.type in ("auto_retry_start", "compaction_start"), RETRY_WAIT, start=start
        )
        if begun is not None and begun.type == "auto_retry_start":
            end = await agent.wait_for(
                lambda e: e.type == "auto_retry_end", RUN_TIMEOUT, start=start
            )
            if end is not None:
                after = agent.events.index(end, start)
                await agent.wait_for(lambda e: e.type == "agent_end", RUN_TIMEOUT, start=after)
        await agent.send({"type": "get_state"})
    else:
        await agent.send({"type": "get_state"})
        await agent.settle(start, QUIET / 5, RUN_TIMEOUT)
    return bool(run.events(start, "auto_retry_start"))


def _classifier_scenario(profile: str, texts: Sequence[Text]) -> Scenario:
    """The profile's classifier rows, one per family of its texts, in one scenario."""
    prefix = "classify" if profile == "seed" else "classify16"
    rows = {
        f"{prefix}-{family}": tuple(t for t in texts if t.family == family)
        for family in dict.fromkeys(t.family for t in texts)
    }

    def narrow(names: Sequence[str]) -> Scenario:
        chosen = [(row, members) for row, members in rows.items() if row in names]
        steps: dict[str, Sequence[Step]] = {
            _prompt(row, n): (HttpError(t.status, t.body or error_body_plain(t.text)), Stream())
            for row, members in chosen
            for n, t in enumerate(members, 1)
        }
        return Scenario(
            prefix,
            ("R-58",) if profile == "pi-1.6" else ("R-5", "R-7"),
            (),
            "",
            (),
            _classify(chosen),
            {"maxRetries": 1, "baseDelayMs": 1},
            profiles=(profile,),
            by_prompt=steps,
            compaction=False,
            rows=tuple(
                (row, f"{sum(t.retried for t in members)} of {len(members)} texts retried")
                for row, members in chosen
            ),
            narrow=narrow,
        )

    return narrow(list(rows))


def error_body_plain(message: str) -> str:
    """``{"error": {"message": message}}``: nothing beside the text that a pattern could see."""
    return json.dumps({"error": {"message": message}})


NEW_SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "agent-settled",
        ("R-54",),
        ("R-54",),
        "one agent_settled after the last agent_end: {aborted: false}; after abort, true",
        (UNAVAILABLE, Stream(), UNAVAILABLE),
        _settled,
        {"maxRetries": 3, "baseDelayMs": 100},
        expected_pi16="one agent_settled after the last agent_end: {aborted: false}; after "
        "abort, true (R-54 is a rule under pi-1.6)",
        beyond_pi16=(),
    ),
    Scenario(
        "prompt-disposition",
        ("R-54",),
        ("R-54",),
        'the prompt\'s answer carries data.disposition "started"',
        (Stream(),),
        _disposition,
        {"maxRetries": 3, "baseDelayMs": 100},
        beyond_pi16=(),
    ),
    Scenario(
        "delay-cap",
        ("R-16", "R-21", "R-53a"),
        (),
        "start(1/3,300ms) start(2/3,600ms) end(ok,2): the seed reads no maxAgentDelayMs",
        (UNAVAILABLE, UNAVAILABLE, Stream()),
        _delay_cap,
        {"maxRetries": 3, "baseDelayMs": 300, "maxAgentDelayMs": 400},
        expected_pi16="start(1/3,300ms) start(2/3,400ms) end(ok,2): capped at maxAgentDelayMs",
    ),
    Scenario(
        "never-retry-quota",
        ("R-5", "R-58"),
        (),
        "a 429 insufficient_quota is retried: R-5 finds 429",
        (QUOTA, Stream()),
        _retried_or_not("R-58", "R-5"),
        {"maxRetries": 3, "baseDelayMs": 100},
        expected_pi16="a 429 insufficient_quota is never retried: no retry events, 1 request",
    ),
    Scenario(
        "usage-limit-no-key-left",
        ("R-17", "R-53b"),
        (),
        "one key: the usage limit waits the exponential delay on it, start(1/3,100ms)",
        (MONTHLY_LIMIT, Stream()),
        _retried_or_not("R-53b", "R-17"),
        {"maxRetries": 3, "baseDelayMs": 100},
        expected_pi16="one key: nothing is retried, agent_end willRetry false, 1 request",
    ),
    Scenario(
        "overflow-nothing-to-compact",
        ("R-2", "R-56a"),
        ("R-56g",),
        "no retry, no summary request, the prompt sent once; compaction_start → "
        "compaction_end {result: null, willRetry: false}; it ends in the overflow error",
        (OVERFLOW, Stream("A summary."), Stream()),
        _nothing_to_compact,
        {"maxRetries": 3, "baseDelayMs": 100},
        keep_recent_tokens=20_000,
        beyond_pi16=(),
        expected_pi16="no retry, no summary request, no compaction event; agent_end willRetry "
        "false; it ends in the overflow error",
    ),
    Scenario(
        "summary-retry",
        ("R-2", "R-56f"),
        (),
        "the summary request's 503 is not retried: no summarization_retry event",
        (Stream("The first answer."), OVERFLOW, UNAVAILABLE, Stream("A summary."), Stream()),
        _summary_retry,
        {"maxRetries": 3, "baseDelayMs": 200},
        fallback=Stream(),
        expected_pi16="summarization_retry_scheduled(1/3,200ms) → attempt_start → finished",
    ),
)

#: Every scenario, each with the profiles it runs under, in the order the kit runs them.
ALL_SCENARIOS: tuple[Scenario, ...] = (
    SCENARIOS
    + NEW_SCENARIOS
    + (_classifier_scenario("seed", SEED_TEXTS), _classifier_scenario("pi-1.6", PI_1_6_TEXTS))
)
