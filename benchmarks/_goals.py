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
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class Goal:
    """One row of the issue's table."""

    key: str
    measure: str  #: the row, as a reader of the report sees it
    target: float
    better: Literal["lower", "higher"]
    unit: str  #: how ``value`` reads: "×" (a ratio) or "F"

    def met(self, value: float) -> bool:
        """Whether ``value`` reaches the target."""
        return value <= self.target if self.better == "lower" else value >= self.target

    @property
    def wanted(self) -> str:
        """``≤ 1.5×``, ``≥ 0.5×``, ``≤ 30 F``."""
        sign = "≤" if self.better == "lower" else "≥"
        return (
            f"{sign} {self.target:g}{self.unit}"
            if self.unit == "×"
            else f"{sign} {self.target:g} {self.unit}"
        )


def _goals(*goals: Goal) -> dict[str, Goal]:
    return {goal.key: goal for goal in goals}


GOALS: dict[str, Goal] = _goals(
    Goal(
        "stream.growth",
        "streamed reply: time growth per ×4 chunks (worst step, 5 000 → 80 000)",
        4.4,
        "lower",
        "×",
    ),
    Goal(
        "stream.vs_provider",
        "streamed reply: session throughput ÷ provider-alone throughput",
        0.5,
        "higher",
        "×",
    ),
    Goal(
        "abort.p50.1",
        "abort() in backoff → prompt() resumes, p50, 1 session (× raw)",
        1.5,
        "lower",
        "×",
    ),
    Goal("abort.p99.1", "abort() in backoff → prompt() resumes, p99, 1 session", 30, "lower", "F"),
    Goal(
        "abort.p50.10000",
        "abort() in backoff → prompt() resumes, p50, 10 000 sessions (× raw)",
        1.5,
        "lower",
        "×",
    ),
    Goal(
        "abort.p99.10000",
        "abort() in backoff → prompt() resumes, p99, 10 000 sessions",
        30,
        "lower",
        "F",
    ),
    Goal("cancel_all.abort", "cancel all 10 000 sessions by abort() (× raw)", 1.5, "lower", "×"),
    Goal(
        "cancel_all.scope",
        "cancel all 10 000 sessions by one outer scope (× raw)",
        1.5,
        "lower",
        "×",
    ),
    Goal("backoff.start", "10 000 sessions into backoff (× raw)", 2.0, "lower", "×"),
    Goal("memory.backoff", "memory per session in backoff (× raw)", 1.5, "lower", "×"),
    Goal(
        "first_try.overhead",
        "first-try success: session ÷ bare loop in one CancelScope",
        1.5,
        "lower",
        "×",
    ),
    Goal("import.time", "import trio_session ÷ import trio", 1.3, "lower", "×"),
    Goal("rpc.spawn", "trio-session rpc spawn → first get_state ÷ pi 0.73.1", 0.15, "lower", "×"),
    Goal(
        "rpc.abort_retry",
        "RPC abort_retry → auto_retry_end p50 ÷ bare Trio echo",
        1.3,
        "lower",
        "×",
    ),
    Goal(
        "rpc.bytes_pi",
        # "pi's shape by default": the same lines, give or take our one documented
        # extra field (a top-level "delta", ~13 bytes a line).
        "RPC bytes, 10 000-chunk reply, default shape ÷ pi's shape (pi's shape: within 1 %)",
        1.01,
        "lower",
        "×",
    ),
    Goal("rpc.lean_growth", "RPC bytes, lean mode: growth per ×4 chunks", 4.4, "lower", "×"),
)


@dataclass(frozen=True)
class Figure:
    """What one benchmark found for one goal.

    Attributes:
        key: a key of ``GOALS``.
        value: the figure compared with the goal (a ratio, or F).
        text: the evidence a reader needs, in one line: the raw medians and the
            baseline (``"0.41 s → 1.60 s for 20 000 → 80 000 chunks"``).
        detail: everything else worth keeping, for the JSON file.
    """

    key: str
    value: float
    text: str
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key not in GOALS:
            msg = f"unknown goal {self.key!r}"
            raise ValueError(msg)

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
            "value": self.value,
            "target": goal.target,
            "better": goal.better,
            "unit": goal.unit,
            "met": goal.met(self.value),
            "text": self.text,
            "detail": self.detail,
        }
