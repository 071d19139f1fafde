"""Running scenarios against an agent command, and printing the table."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import trio

from ._agent import AgentError, Observed, start_agent
from ._checks import Check, Result, Run, requests, retry_summary
from ._scenarios import SCENARIOS, Scenario
from ._server import LoopbackLLM

#: How long one scenario may take at all, seconds (its runs have their own timeouts).
SCENARIO_TIMEOUT = 120.0


def select(only: Sequence[str] | None) -> tuple[Scenario, ...]:
    """The scenarios named in ``only`` (all if empty); ``ValueError`` naming an unknown one."""
    if not only:
        return SCENARIOS
    known = {s.name: s for s in SCENARIOS}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ValueError(
            f"unknown scenario {', '.join(unknown)}; the scenarios are: {', '.join(known)}"
        )
    return tuple(known[name] for name in only)


async def run_scenario(scenario: Scenario, command: Sequence[str], work: Path) -> Result:
    """Run one scenario against a fresh agent started from ``command``."""
    checks: list[Check] = []
    retry_events: list[Observed] = []
    error = None
    fallback = scenario.fallback
    server = LoopbackLLM(list(scenario.script), keyed=dict(scenario.keyed))
    if fallback is not None:
        server.fallback = fallback
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            with trio.move_on_after(SCENARIO_TIMEOUT) as scope:
                async with start_agent(
                    command, work, server.base_url, scenario.retry, scenario.keys
                ) as agent:
                    run = Run(agent, server, scenario.base_delay_ms)
                    try:
                        await scenario.drive(run)
                    finally:
                        checks = run.checks
                        retry_events = run.events(0, "auto_retry_start", "auto_retry_end")
            if scope.cancelled_caught:
                error = f"timed out after {SCENARIO_TIMEOUT:g} s"
            nursery.cancel_scope.cancel()
    except* AgentError as group:
        error = "; ".join(str(exc) for exc in _leaves(group))
    observed = f"{retry_summary(retry_events)}; {requests(len(server.requests))}"
    return Result(
        scenario.name,
        scenario.rules,
        scenario.beyond_rules,
        scenario.expected,
        observed,
        tuple(checks),
        error,
    )


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


async def run_all(
    command: Sequence[str], scenarios: Sequence[Scenario], work: Path | None = None
) -> list[Result]:
    """Run ``scenarios`` one after another, each against a fresh agent."""
    results = []
    with tempfile.TemporaryDirectory(prefix="trio-session-conformance-") as temporary:
        root = work or Path(temporary)
        for scenario in scenarios:
            results.append(await run_scenario(scenario, command, root / scenario.name))
    return results


def passed(results: Sequence[Result]) -> bool:
    """Whether every non-[beyond] rule held in every scenario."""
    return all(r.verdict in ("pass", "beyond-differs") for r in results)


def print_table(results: Sequence[Result], out: TextIO) -> None:
    """One row per scenario, then the failed checks under it."""
    out.write("scenario | rules | expected | observed | verdict\n")
    for r in results:
        rules = ", ".join(
            f"{rule} [beyond]" if rule in r.beyond_rules else rule for rule in r.rules
        )
        out.write(f"{r.name} | {rules} | {r.expected} | {r.error or r.observed} | {r.verdict}\n")
        for c in r.checks:
            if not c.ok:
                mark = "beyond the reference" if c.beyond else "FAIL"
                out.write(f"    {mark}: {c.rules}: expected {c.expected}; observed {c.observed}\n")
    total = len(results)
    good = sum(r.verdict == "pass" for r in results)
    beyond = sum(r.verdict == "beyond-differs" for r in results)
    out.write(f"{good} of {total} scenarios pass, {beyond} differ only beyond the reference\n")


def print_json(results: Sequence[Result], out: TextIO) -> None:
    """The results as one JSON document."""
    document = {"passed": passed(results), "scenarios": [r.to_json() for r in results]}
    out.write(json.dumps(document, indent=2) + "\n")


def run_command(
    command: Sequence[str], only: Sequence[str] | None, as_json: bool, out: TextIO
) -> int:
    """``trio-session conformance``: run, print, and exit 0 only if every seed rule held.

    Raises ``ValueError`` for an unknown scenario name or a missing command.
    """
    if not command:
        raise ValueError(
            "conformance needs the agent's command after '--', for example: "
            "trio-session conformance -- trio-session rpc --no-session"
        )
    if shutil.which(command[0]) is None:
        raise ValueError(f"cannot find the agent command {command[0]!r}")
    scenarios = select(only)
    results = trio.run(run_all, command, scenarios)
    if as_json:
        print_json(results, out)
    else:
        print_table(results, out)
    return 0 if passed(results) else 1
