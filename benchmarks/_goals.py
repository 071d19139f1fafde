"""The goals of issue 15, and the figure each benchmark reports against one.

Every measure is a ratio against a baseline measured in the same process or the
same run (or, for the p99 tail, a count of F: one ``trio.lowlevel.checkpoint()``
timed in the same process), so it means the same on a quiet and on a busy
machine. A benchmark module exposes::

    def measure(quick: bool) -> list[Figure]: ...

and ``benchmarks/run.py`` runs them all, prints every figure beside its goal and
writes the lot as JSON. ``quick`` shrinks the sizes so the whole set runs in CI
in about a minute: it shows that every benchmark runs, not how fast.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Goal:
    """One row of the issue's table.

    ``wording`` is the goal as it was written, printed beside its figure; ``reduced`` says
    how the figure is computed from the samples, so a reader can check that the two agree.
    A goal with ``target`` None is a peer row: shown, never judged.
    """

    key: str
    measure: str  #: the row, as a reader of the report sees it
    target: float | None
    better: Literal["lower", "higher"]
    unit: str  #: how ``value`` reads: "×" (a ratio) or "F"
    wording: str = ""  #: the goal as written
    reduced: str = ""  #: how the figure is reduced from the samples
    timed: bool = True  #: a timing: its verdict needs ``MIN_ROUNDS`` rounds

    def met(self, value: float) -> bool:
        """Whether ``value`` reaches the target (a peer row is never "met")."""
        if self.target is None:
            return False
        return value <= self.target if self.better == "lower" else value >= self.target

    def miss(self, value: float) -> float:
        """By how much ``value`` misses (> 1) or beats (≤ 1) the target, as a factor."""
        if self.target is None:
            return math.nan
        if self.better == "lower":
            return value / self.target
        return self.target / value if value > 0 else math.inf

    @property
    def wanted(self) -> str:
        """``≤ 1.5×``, ``≥ 0.5×``, ``≤ 30 F``; ``peer`` for a peer row."""
        if self.target is None:
            return "peer"
        sign = "≤" if self.better == "lower" else "≥"
        return (
            f"{sign} {self.target:g}{self.unit}"
            if self.unit == "×"
            else f"{sign} {self.target:g} {self.unit}"
        )


#: A timed verdict is the median of at least this many rounds (full runs).
MIN_ROUNDS = 3


def _goals(*goals: Goal) -> dict[str, Goal]:
    return {goal.key: goal for goal in goals}


_ROUND = (
    "each round: median µs of one session block ÷ median µs of the adjacent raw-Trio block"
    " (blocks alternate); the figure is the median over rounds"
)

GOALS: dict[str, Goal] = _goals(
    Goal(
        "stream.growth",
        "streamed reply, event.delta reader: time growth per ×4 chunks (worst step)",
        4.4,
        "lower",
        "×",
        wording="a streamed reply is linear in its chunks (≤ 4.4× per ×4)",
        reduced="each round times 5 000 → 20 000 → 80 000 chunks; its worst ×4 step;"
        " median over rounds",
    ),
    Goal(
        "stream.message",
        "streamed reply, event.message reader: time growth per ×4 chunks (worst step)",
        4.4,
        "lower",
        "×",
        wording="a streamed reply is linear in its chunks (≤ 4.4× per ×4), whatever the"
        " reader reads",
        reduced="as stream.growth, the subscriber reads event.message on every update;"
        " 2 500 → 10 000 → 40 000 chunks",
    ),
    Goal(
        "stream.vs_provider",
        "streamed reply: session throughput ÷ provider-alone throughput",
        0.5,
        "higher",
        "×",
        wording="session throughput ≥ 0.5× the provider alone",
        reduced="each round: provider-alone seconds ÷ session seconds, back to back;"
        " median over rounds",
    ),
    Goal(
        "abort.p50.1",
        "abort() in backoff → prompt() resumes, p50, 1 session (× raw)",
        1.5,
        "lower",
        "×",
        wording="abort() in backoff → prompt() resumes, p50, 1 session ≤ 1.5× raw Trio",
        reduced=_ROUND,
    ),
    Goal(
        "abort.p99.1",
        "abort() in backoff → prompt() resumes, p99, 1 session",
        30,
        "lower",
        "F",
        wording="the same, p99 ≤ 30 F",
        reduced="each round: p99 of one session block in F of that block (F is a unit for"
        " tails); median over rounds",
    ),
    Goal(
        "abort.p50.10000",
        "abort() in backoff → prompt() resumes, p50, 10 000 sessions (× raw)",
        1.5,
        "lower",
        "×",
        wording="abort() in backoff → prompt() resumes, p50, 10 000 sessions ≤ 1.5× raw",
        reduced=_ROUND,
    ),
    Goal(
        "abort.p99.10000",
        "abort() in backoff → prompt() resumes, p99, 10 000 sessions",
        30,
        "lower",
        "F",
        wording="the same, p99 ≤ 30 F",
        reduced="each round: p99 of one session block in F of that block; median over rounds",
    ),
    Goal(
        "cancel_all.abort",
        "cancel all 10 000 sessions at once, start_soon(abort()) each (× raw)",
        1.5,
        "lower",
        "×",
        wording="cancel all 10 000 sessions by abort() ≤ 1.5× raw (all at once: what an"
        " application shutting down does)",
        reduced="each round: ms from the first start_soon to the nursery's exit, session"
        " block ÷ raw block (raw: start_soon(cs.cancel) each); median over rounds",
    ),
    Goal(
        "cancel_all.abort_retry",
        "cancel all 10 000 sessions at once, start_soon(abort_retry()) each (× raw)",
        1.5,
        "lower",
        "×",
        wording="cancel all 10 000 sessions by abort_retry() ≤ 1.5× raw (all at once)",
        reduced="as cancel_all.abort, with abort_retry()",
    ),
    Goal(
        "cancel_all.abort_seq",
        "cancel all 10 000 sessions by abort(), one after another (× raw)",
        1.5,
        "lower",
        "×",
        wording="cancel all 10 000 sessions by abort() ≤ 1.5× raw (each awaited in turn)",
        reduced="each round: ms of the whole loop, session block ÷ raw block; median over rounds",
    ),
    Goal(
        "cancel_all.scope",
        "cancel all 10 000 sessions by one outer scope (× raw)",
        1.5,
        "lower",
        "×",
        wording="cancel all 10 000 sessions by one outer scope ≤ 1.5× raw",
        reduced="each round: ms from cancel() to the nursery's exit, session ÷ raw;"
        " median over rounds",
    ),
    Goal(
        "backoff.start",
        "10 000 sessions into backoff (× raw)",
        2.0,
        "lower",
        "×",
        wording="10 000 sessions into backoff ≤ 2× raw",
        reduced="each round: ms from the first start_soon until all sleep, session ÷ raw;"
        " median over rounds",
    ),
    Goal(
        "memory.backoff",
        "memory per session in backoff (× raw)",
        1.5,
        "lower",
        "×",
        wording="memory per session in backoff ≤ 1.5× raw",
        reduced="each round: tracemalloc bytes per session ÷ per raw floor (N = 1 000);"
        " median over rounds",
    ),
    Goal(
        "first_try.overhead",
        "first-try success: session overhead ÷ one CancelScope's overhead",
        1.5,
        "lower",
        "×",
        wording="first-try success: overhead ≤ 1.5× the overhead of one CancelScope around"
        " the bare loop",
        reduced="each round: (session − bare loop) ÷ (bare loop in one CancelScope − bare"
        " loop), medians in µs of alternating batches; median over rounds",
    ),
    Goal(
        "import.time",
        "import trio_session ÷ import trio",
        1.3,
        "lower",
        "×",
        wording="`import trio_session` ≤ 1.3× `import trio` (the statement alone: the"
        " package is lazy, it imports almost nothing)",
        reduced="each round: median ms of fresh interpreters, alternating; median over rounds",
    ),
    Goal(
        "import.session",
        "what a session program imports ÷ import trio",
        1.3,
        "lower",
        "×",
        wording="`import trio_session` ≤ 1.3× `import trio`, read as a program that runs a"
        " session imports: open_session, FauxProvider, Model",
        reduced="as import.time",
    ),
    Goal(
        "rpc.spawn",
        "trio-session rpc spawn → first get_state ÷ pi 0.73.1",
        0.15,
        "lower",
        "×",
        wording="rpc spawn → first get_state ≤ 0.15× pi (an OpenAI-compatible model"
        " configured, never called)",
        reduced="each round: median ms of alternating spawns, ours ÷ pi's; median over rounds",
    ),
    Goal(
        "rpc.spawn_http",
        "trio-session rpc spawn → first prompt's agent_end over HTTP ÷ pi 0.73.1",
        0.15,
        "lower",
        "×",
        wording="rpc start-up ≤ 0.15× pi, with a real HTTP provider: openai-completions"
        " against a loopback server, to the first reply's agent_end",
        reduced="as rpc.spawn",
    ),
    Goal(
        "rpc.abort_retry",
        "RPC abort_retry → auto_retry_end p50 ÷ bare Trio echo",
        1.3,
        "lower",
        "×",
        wording="RPC abort_retry → auto_retry_end p50 ≤ 1.3× a bare Trio echo",
        reduced="each round: median µs of 50 alternating samples, ours ÷ the echo's;"
        " median over rounds",
    ),
    # A peer row since issue 44: pi 1.6.0 no longer sends the whole partial message with
    # every update, and pi's RpcClients read our lean lines unchanged, so matching 0.73.1's
    # bytes is no goal; rpc.lean_growth (below) is. Shown, never judged.
    Goal(
        "rpc.bytes_pi",
        "peer: RPC bytes of a 10 000-chunk reply on the wire, ours ÷ pi 0.73.1's (default"
        " shape; no longer a goal)",
        None,
        "lower",
        "×",
        wording="RPC output of a 10 000-chunk reply in pi 0.73.1's shape by default (bytes"
        " within 1 % of pi's, the same lines): retired in issue 44, shown as a peer",
        reduced="bytes from the prompt line to agent_end, trio-session rpc ÷ pi 0.73.1, both"
        " against the same loopback OpenAI server (pi's recorded by"
        " benchmarks/record_pi_wire.py when node is absent)",
        timed=False,
    ),
    Goal(
        "rpc.lean_growth",
        "RPC bytes, lean mode: growth per ×4 chunks",
        4.4,
        "lower",
        "×",
        wording="RPC bytes in lean mode are linear in the chunks (≤ 4.4× per ×4)",
        reduced="bytes at 10 000 chunks ÷ at 2 500",
        timed=False,
    ),
    Goal(
        "peer.asyncio_taskgroup",
        "peer: asyncio TaskGroup + asyncio.timeout session, cancel → resumes, p50 (× raw Trio)",
        None,
        "lower",
        "×",
        reduced=_ROUND,
    ),
    Goal(
        "peer.asyncio_cancel",
        "peer: raw asyncio Task.cancel() → resumes, p50 (× raw Trio)",
        None,
        "lower",
        "×",
        reduced=_ROUND,
    ),
    Goal(
        "peer.node_abort",
        "peer: node setTimeout + AbortController abort() → resumes, p50 (× raw Trio)",
        None,
        "lower",
        "×",
        reduced="each round: median µs of a node block ÷ median µs of the adjacent raw-Trio"
        " block; median over rounds",
    ),
    Goal(
        "peer.session",
        "trio_session abort() → prompt() resumes, p50 (× raw Trio), for the peer table",
        None,
        "lower",
        "×",
        reduced=_ROUND,
    ),
)


@dataclass(frozen=True)
class Figure:
    """What one benchmark found for one goal.

    Attributes:
        key: a key of ``GOALS``.
        rounds: the figure of each round (a ratio, or F); the value is their median.
        text: the evidence a reader needs, in one line: the raw medians and the
            baseline (``"0.41 s → 1.60 s for 20 000 → 80 000 chunks"``).
        floor: the raw-Trio floor (or other baseline) of the same run, in its own unit.
        detail: everything else worth keeping, for the JSON file.
    """

    key: str
    rounds: tuple[float, ...]
    text: str
    floor: str = ""
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key not in GOALS:
            msg = f"unknown goal {self.key!r}"
            raise ValueError(msg)
        if not self.rounds:
            msg = f"figure {self.key!r} has no rounds"
            raise ValueError(msg)

    @property
    def value(self) -> float:
        """The median of the rounds."""
        return float(statistics.median(self.rounds))

    @property
    def goal(self) -> Goal:
        """The goal this figure is measured against."""
        return GOALS[self.key]

    def as_json(self) -> dict[str, Any]:
        """The figure, its goal and the verdict, as JSON-ready data."""
        goal = self.goal
        return {
            "key": self.key,
            "measure": goal.measure,
            "wording": goal.wording,
            "reduced": goal.reduced,
            "value": self.value,
            "rounds": list(self.rounds),
            "spread": [min(self.rounds), max(self.rounds)],
            "target": goal.target,
            "better": goal.better,
            "unit": goal.unit,
            "timed": goal.timed,
            "met": goal.met(self.value),
            "miss": goal.miss(self.value),
            "text": self.text,
            "floor": self.floor,
            "detail": self.detail,
        }


def pairs_ratio(numerators: list[float], denominators: list[float]) -> tuple[float, ...]:
    """Round by round, ``numerators[i] / denominators[i]`` (the same unit, adjacent blocks)."""
    return tuple(a / b for a, b in zip(numerators, denominators, strict=True))


def chunked(samples: list[float], rounds: int) -> list[list[float]]:
    """``samples`` (taken in order) cut into ``rounds`` consecutive groups, each non-empty."""
    rounds = max(1, min(rounds, len(samples)))
    size = len(samples) // rounds
    return [samples[i * size : (i + 1) * size] for i in range(rounds)]
