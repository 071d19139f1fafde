"""What a scenario works with and what it yields: the run, its checks, the result.

A check names the rules of docs/spec.md it tests; a check of a rule marked **[beyond]**
there is reported as "beyond the reference" when it does not hold, never as a failure.

Timing is checked both ways. The announced ``delayMs`` must equal the profile's formula
(R-16: ``baseDelayMs * 2 ** (attempt - 1)``; under pi-1.6 capped at
``retry.maxAgentDelayMs``, R-53a): a delay that differs, jittered or not, fails R-16.
And the agent must sleep what it announced (R-21): the gap between the end of the failed
request's answer and the re-attempt's arrival must be within ``tolerance_ms(delay)`` =
``TOLERANCE_RATIO`` × the delay + ``TOLERANCE_MS`` of it, earlier or later. Later, it
may also be as late as the kit's own timers were meanwhile (``LagProbe``): on a loaded
machine every process wakes late, and that is the machine, not the agent's sleep. Early
stays strict: a sleep cut short is never the machine's doing.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import trio

from .._core.classes import define, frozen
from ._agent import Agent, Observed
from ._server import LoopbackLLM, Request

#: The tolerance on a sleep (R-21): this share of the announced delay, plus TOLERANCE_MS.
TOLERANCE_RATIO = 0.10
TOLERANCE_MS = 250
#: How long the kit waits for something that should come at once (a hang-up), seconds.
SLACK = 5.0
#: How long nothing new must happen before a run counts as over, seconds.
QUIET = 0.5
#: How long one run may take at most, seconds.
RUN_TIMEOUT = 30.0

Verdict = Literal["pass", "FAIL", "beyond-differs", "not tested", "error"]
PROFILES = ("seed", "pi-1.6")


def tolerance_ms(delay_ms: float) -> float:
    """How far a sleep may be from its announced ``delay_ms`` (R-21), milliseconds."""
    return TOLERANCE_RATIO * delay_ms + TOLERANCE_MS


@define(eq=False)
class LagProbe:
    """How late the kit's own timers wake while a scenario runs: the machine's load,
    measured in the same window as the agent's sleeps.

    ``run`` sleeps ``interval`` at a time until cancelled; ``worst`` is the latest wake-up
    seen, in seconds past its deadline.
    """

    interval: float = 0.01
    worst: float = 0.0

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            due = trio.current_time() + self.interval
            await trio.sleep_until(due)
            self.worst = max(self.worst, trio.current_time() - due)


@frozen
class Check:
    """One comparison: the rules, what they say, what the agent did, and whether it holds."""

    rules: str
    expected: str
    observed: str
    ok: bool
    beyond: bool = False
    #: The row it belongs to, in a scenario of several rows.
    row: str | None = None


@frozen
class Result:
    """A scenario's outcome.

    ``error`` says why the scenario could not run to its end; ``not_tested`` why its
    rules could not be tested on this agent (it gives the kit no way to set the scenario
    up); ``requests`` each request the server saw: its prompt, attempt and answer;
    ``broken`` that it showed
    the agent is no RPC agent at all (its output is not JSON lines, or it died, stayed
    silent or flooded before answering a command), so the kit runs no further scenario
    against it; ``ran`` is false for those (their ``error`` says so). ``notes``: what
    else the kit saw (an agent that would not exit).
    """

    name: str
    rules: tuple[str, ...]
    beyond_rules: tuple[str, ...]
    expected: str
    observed: str
    checks: tuple[Check, ...]
    error: str | None = None
    notes: tuple[str, ...] = ()
    broken: bool = False
    ran: bool = True
    not_tested: str | None = None
    requests: tuple[str, ...] = ()
    #: How long the scenario took, seconds.
    seconds: float = 0.0

    @property
    def verdict(self) -> Verdict:
        """``pass``; ``FAIL`` if a non-[beyond] check failed; ``beyond-differs`` if only
        [beyond] ones did; ``not tested`` if the agent gave no way to set the scenario up;
        ``error`` if the scenario could not run."""
        if self.error is not None:
            return "error"
        if self.not_tested is not None:
            return "not tested"
        if any(not c.ok and not c.beyond for c in self.checks):
            return "FAIL"
        if any(not c.ok for c in self.checks):
            return "beyond-differs"
        return "pass"

    def to_json(self) -> dict[str, Any]:
        """The result as JSON data (``--json``)."""
        return {
            "name": self.name,
            "rules": list(self.rules),
            "beyondRules": list(self.beyond_rules),
            "expected": self.expected,
            "observed": self.observed,
            "verdict": self.verdict,
            "error": self.error,
            "notes": list(self.notes),
            "broken": self.broken,
            "ran": self.ran,
            "notTested": self.not_tested,
            "requests": list(self.requests),
            "checks": [
                {
                    "rules": c.rules,
                    "expected": c.expected,
                    "observed": c.observed,
                    "ok": c.ok,
                    "beyond": c.beyond,
                }
                for c in self.checks
            ],
        }


@define(eq=False)
class Run:
    """What a scenario's driver works with: the agent, the server, and the checks so far."""

    agent: Agent
    server: LoopbackLLM
    base_delay_ms: int
    profile: str = "seed"
    max_agent_delay_ms: int = 60_000
    #: The kit's own timer lag meanwhile; ``None``: not measured (no allowance for it).
    lag: LagProbe | None = None
    checks: list[Check] = attrs.field(factory=list)
    #: Set by a driver whose scenario the agent gives no way to set up: why.
    not_tested: str | None = None
    #: The prompts sent, in order, and the agent's answers to them.
    prompts: list[str] = attrs.field(factory=list)
    answers: list[Mapping[str, Any]] = attrs.field(factory=list)

    def formula(self, attempt: int) -> int:
        """The delay the profile announces for ``attempt`` (R-16; R-53a under pi-1.6)."""
        delay = int(self.base_delay_ms * 2 ** (attempt - 1))
        return min(delay, self.max_agent_delay_ms) if self.profile == "pi-1.6" else delay

    @property
    def delay_rule(self) -> str:
        """The rule the announced delay follows: R-16, and R-53a under pi-1.6."""
        return "R-16, R-53a" if self.profile == "pi-1.6" else "R-16"

    def check(
        self,
        rules: str,
        expected: str,
        observed: str,
        ok: bool,
        *,
        beyond: bool = False,
        row: str | None = None,
    ) -> None:
        """Record one comparison (of the row ``row``, in a scenario of several)."""
        self.checks.append(Check(rules, expected, observed, ok, beyond, row))

    async def prompt(self, message: str) -> int:
        """Send a prompt; the index of the first event that belongs to its run."""
        start = len(self.agent.events)
        self.prompts.append(message)
        response = await self.agent.send({"type": "prompt", "message": message})
        self.answers.append(response)
        self.check(
            "R-39",
            "prompt accepted",
            "accepted" if response.get("success") else f"refused: {response.get('error')}",
            bool(response.get("success")),
        )
        return start

    async def settle(self, start: int) -> None:
        """Wait until the run is over (see ``Agent.settle``)."""
        ended = await self.agent.settle(start, QUIET, RUN_TIMEOUT)
        self.check(
            "R-35",
            "the run ends (agent_end, no retry pending)",
            "ended" if ended else f"still running after {RUN_TIMEOUT:g} s",
            ended,
        )

    def events(self, start: int = 0, *types: str) -> list[Observed]:
        """The events since ``start``, of the given types (all if none)."""
        return [e for e in self.agent.events[start:] if not types or e.type in types]

    def expect_retries(
        self,
        start: int,
        rules: str,
        expected: Sequence[str],
        delay_rule: str | None = None,
        *,
        beyond: bool = False,
    ) -> None:
        """Compare the run's ``auto_retry_*`` events, normalised, with ``expected``.

        Two checks: the events without their delays, under ``rules``; the announced
        delays (``start(1/3,100ms)``'s 100), under ``delay_rule`` (the profile's formula
        rule if not given), as far as both have starts.
        """
        events = self.events(start, "auto_retry_start", "auto_retry_end")
        observed = retry_summary(events)
        shape = [_DELAY.sub("", item) for item in expected]
        self.check(
            rules,
            " ".join(shape) or "no retry events",
            _DELAY.sub("", observed),
            matches(_DELAY.sub("", observed), shape),
            beyond=beyond,
        )
        want = [int(m.group(1)) for item in expected if (m := _DELAY.search(item))]
        seen = [e.event.get("delayMs") for e in events if e.type == "auto_retry_start"]
        if want and seen:
            pairs = list(zip(want, seen, strict=False))
            self.check(
                delay_rule or self.delay_rule,
                "delayMs " + ", ".join(str(w) for w, _ in pairs),
                "delayMs " + ", ".join(str(s) for _, s in pairs),
                all(w == s for w, s in pairs),
                beyond=beyond,
            )

    def expect_requests(self, count: int, rules: str = "R-15", *, beyond: bool = False) -> None:
        """The server saw exactly ``count`` chat requests."""
        seen = len(self.server.requests)
        self.check(rules, requests(count), requests(seen), seen == count, beyond=beyond)

    def expect_spacing(self, start: int, first: int = 0, rules: str = "R-21") -> None:
        """Each re-attempt came its announced delay after the answer to the request before
        it, within ``tolerance_ms``: the run's ``auto_retry_start`` events, in order, and
        the server's requests from index ``first``."""
        delays = [
            float(e.event.get("delayMs") or 0) for e in self.events(start, "auto_retry_start")
        ]
        chain = self.server.requests[first:]
        gaps = [
            round((b.time - (a.answered or a.time)) * 1000) for a, b in itertools.pairwise(chain)
        ]
        pairs = list(zip(delays, gaps, strict=False))
        lag = round(self.lag.worst * 1000) if self.lag is not None else 0
        ok = all(-tolerance_ms(d) <= g - d <= tolerance_ms(d) + lag for d, g in pairs)
        expected = "gaps " + ", ".join(f"{d:g} ± {tolerance_ms(d):g} ms" for d, _ in pairs)
        observed = "gaps " + ", ".join(f"{g} ms" for _, g in pairs)
        if ok and any(g - d > tolerance_ms(d) for d, g in pairs):
            observed += f" (late by no more than the kit's own timers were: {lag} ms)"
        self.check(rules, expected or "no re-attempt", observed or "no re-attempt", ok)

    def summary_requests(self, start: int) -> list[Request]:
        """The compaction's summary requests in the run from ``start``: the requests that
        carry none of the prompts as their last user message and reached the server before
        the run's last ``compaction_end`` (all such requests if there is none). A
        re-sent turn after a compaction carries a prompt, or (pi 1.6.0's split turn) only
        the summary, and comes after that event."""
        ends = [e.time for e in self.events(start, "compaction_end")]
        until = ends[-1] if ends else math.inf
        return [
            r for r in self.server.requests if r.prompt() not in self.prompts and r.time <= until
        ]

    def expect_summary_requests(
        self, start: int, rules: str, asked: str | None, *, beyond: bool = False
    ) -> None:
        """One check: no summary request (``asked`` is ``None``), or at least one, and
        one of them carries ``asked`` (a text of the conversation it must summarise)."""
        found = self.summary_requests(start)
        carried = asked is not None and any(asked in json.dumps(r.body) for r in found)
        if asked is None:
            expected, ok = "no summary request", not found
        else:
            expected, ok = f"a summary request carrying {asked!r}", carried
        observed = f"{len(found)} summary request(s)"
        if found and asked is not None:
            observed += f", {'one' if carried else 'none'} carrying {asked!r}"
        self.check(rules, expected, observed, ok, beyond=beyond)

    def expect_final_error(
        self, start: int, rules: str, error: str | None, *, beyond: bool = False
    ) -> None:
        """One check: how the run ended — its last assistant message an error whose text
        carries ``error``, or (``None``) an answer — and no ``compaction_end`` with an
        ``errorMessage`` (a compaction that failed)."""
        ends = [e for e in self.events(start, "message_end") if _role(e) == "assistant"]
        last = ends[-1].event.get("message") if ends else None
        text = last.get("errorMessage") if isinstance(last, Mapping) else None
        failed = [
            str(e.event.get("errorMessage"))
            for e in self.events(start, "compaction_end")
            if e.event.get("errorMessage")
        ]
        if error is None:
            expected = "an answer, no compaction error"
            ok = last is not None and text is None and not failed
        else:
            expected = f"the error {error!r}, no compaction error"
            ok = isinstance(text, str) and error in text and not failed
        observed = f"the error {text!r}" if text else "an answer" if last else "no reply"
        if failed:
            observed += f"; compaction_end errorMessage {failed[-1]!r}"
        self.check(rules, expected, observed, ok, beyond=beyond)

    async def messages(self) -> list[Mapping[str, Any]]:
        """The agent's runtime context, from ``get_messages``."""
        response = await self.agent.send({"type": "get_messages"})
        data = response.get("data")
        messages = data.get("messages") if isinstance(data, dict) else None
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    async def state(self) -> Mapping[str, Any]:
        """The agent's ``get_state`` data."""
        response = await self.agent.send({"type": "get_state"})
        data = response.get("data")
        return data if isinstance(data, dict) else {}


_DELAY = re.compile(r",(-?\d+)ms")


def requests(count: int) -> str:
    """``1 request``, ``3 requests``."""
    return f"{count} request{'' if count == 1 else 's'}"


def retry_summary(events: Sequence[Observed]) -> str:
    """``start(1/3,100ms) end(ok,1)`` / ``end(fail,2,"503 …")``: the retry events, short."""
    parts = []
    for observed in events:
        e = observed.event
        if observed.type == "auto_retry_start":
            parts.append(f"start({e.get('attempt')}/{e.get('maxAttempts')},{e.get('delayMs')}ms)")
        elif e.get("success") is True:
            parts.append(f"end(ok,{e.get('attempt')})")
        else:
            final = str(e.get("finalError", ""))[:60]
            parts.append(f"end(fail,{e.get('attempt')},{final!r})")
    return " ".join(parts) or "no retry events"


def matches(observed: str, expected: Sequence[str]) -> bool:
    """Whether a ``retry_summary`` matches ``expected`` items; ``*`` in an item is a wildcard."""
    pattern = r"\s+".join(re.escape(item).replace(r"\*", ".*?") for item in expected)
    if not expected:
        return observed == "no retry events"
    return re.fullmatch(pattern, observed) is not None


def _role(observed: Observed) -> str | None:
    message = observed.event.get("message")
    return message.get("role") if isinstance(message, Mapping) else None
