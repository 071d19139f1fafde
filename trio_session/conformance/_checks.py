"""What a scenario works with and what it yields: the run, its checks, the result.

A check names the rules of docs/spec.md it tests; a check of a rule marked **[beyond]**
there is reported as "beyond the reference" when it does not hold, never as a failure.
Tolerances: a re-attempt may not arrive before ``EARLY`` × the announced delay after the
failed request (timers and process scheduling make it later, never earlier); it must
arrive within the delay plus ``SLACK`` seconds.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ._agent import Agent, Observed
from ._server import LoopbackLLM

#: The lower tolerance on spacing: a re-attempt may come no earlier than this × the delay.
EARLY = 0.9
#: The upper tolerance on spacing, seconds: a re-attempt must come within delay + SLACK.
SLACK = 5.0
#: How long nothing new must happen before a run counts as over, seconds.
QUIET = 0.5
#: How long one run may take at most, seconds.
RUN_TIMEOUT = 30.0

Verdict = Literal["pass", "FAIL", "beyond-differs", "error"]


@attrs.frozen
class Check:
    """One comparison: the rules, what they say, what the agent did, and whether it holds."""

    rules: str
    expected: str
    observed: str
    ok: bool
    beyond: bool = False


@attrs.frozen
class Result:
    """A scenario's outcome.

    ``error`` says why the scenario could not run to its end; ``broken`` that it showed
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

    @property
    def verdict(self) -> Verdict:
        """``pass``; ``FAIL`` if a non-[beyond] check failed; ``beyond-differs`` if only
        [beyond] ones did; ``error`` if the scenario could not run."""
        if self.error is not None:
            return "error"
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


@attrs.define(eq=False)
class Run:
    """What a scenario's driver works with: the agent, the server, and the checks so far."""

    agent: Agent
    server: LoopbackLLM
    base_delay_ms: int
    checks: list[Check] = attrs.field(factory=list)

    def check(
        self, rules: str, expected: str, observed: str, ok: bool, *, beyond: bool = False
    ) -> None:
        """Record one comparison."""
        self.checks.append(Check(rules, expected, observed, ok, beyond))

    async def prompt(self, message: str) -> int:
        """Send a prompt; the index of the first event that belongs to its run."""
        start = len(self.agent.events)
        response = await self.agent.send({"type": "prompt", "message": message})
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

    def expect_retries(self, start: int, rules: str, expected: Sequence[str]) -> None:
        """Compare the run's ``auto_retry_*`` events, normalised, with ``expected``."""
        observed = retry_summary(self.events(start, "auto_retry_start", "auto_retry_end"))
        self.check(
            rules, " ".join(expected) or "no retry events", observed, matches(observed, expected)
        )

    def expect_requests(self, count: int, rules: str = "R-15") -> None:
        """The server saw exactly ``count`` chat requests."""
        seen = len(self.server.requests)
        self.check(rules, requests(count), requests(seen), seen == count)

    def expect_spacing(self, delays_ms: Sequence[int], rules: str = "R-16, R-21") -> None:
        """Request ``i + 1`` came ``delays_ms[i]`` after request ``i`` (tolerances above)."""
        times = [r.time for r in self.server.requests]
        gaps = [round((b - a) * 1000) for a, b in itertools.pairwise(times)]
        ok = len(gaps) >= len(delays_ms) and all(
            EARLY * d <= g <= d + SLACK * 1000 for d, g in zip(delays_ms, gaps, strict=False)
        )
        expected = "gaps ≥ " + ", ".join(f"{EARLY:g}×{d} ms" for d in delays_ms)
        self.check(rules, expected, "gaps " + ", ".join(f"{g} ms" for g in gaps), ok)

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
