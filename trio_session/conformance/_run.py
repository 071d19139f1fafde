"""Running scenarios against an agent command, and printing the table."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import attrs
import trio

from ._agent import Agent, AgentError, Observed, start_agent
from ._checks import PROFILES, Check, LagProbe, Result, Run, requests, retry_summary
from ._rows import ALL_SCENARIOS
from ._scenarios import Scenario
from ._server import LoopbackLLM

#: How long one scenario may take at all, seconds (its runs have their own timeouts).
SCENARIO_TIMEOUT = 120.0


def scenarios_for(profile: str) -> tuple[Scenario, ...]:
    """The scenarios that run under ``profile``, in order."""
    return tuple(s for s in ALL_SCENARIOS if profile in s.profiles)


def row_names(profile: str) -> tuple[str, ...]:
    """The names of the rows ``profile``'s scenarios yield, in order."""
    return tuple(name for s in scenarios_for(profile) for name in s.names)


def select(only: Sequence[str] | None, profile: str = "seed") -> tuple[Scenario, ...]:
    """The scenarios of ``profile`` whose rows are named in ``only`` (all if empty), a
    scenario of several rows narrowed to those named; ``ValueError`` naming an unknown
    profile or row."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; the profiles are: {', '.join(PROFILES)}")
    scenarios = scenarios_for(profile)
    if not only:
        return scenarios
    known = row_names(profile)
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ValueError(
            f"unknown scenario {', '.join(unknown)} under --profile {profile}; "
            f"the scenarios are: {', '.join(known)}"
        )
    chosen = []
    for scenario in scenarios:
        names = [name for name in scenario.names if name in only]
        if names and scenario.rows and scenario.narrow is not None:
            chosen.append(scenario.narrow(names))
        elif names:
            chosen.append(scenario)
    return tuple(chosen)


def split(scenario: Scenario, result: Result) -> list[Result]:
    """A scenario of several rows' result as one result per row: each with the checks
    marked with its name (and any failed check of none), and its prompts' requests."""
    if not scenario.rows:
        return [result]
    rows = []
    for number, (row, expected) in enumerate(scenario.rows):
        checks = tuple(c for c in result.checks if c.row == row or (c.row is None and not c.ok))
        sent = tuple(r for r in result.requests if f"'{row}: text " in r)
        rows.append(
            attrs.evolve(
                result,
                name=row,
                expected=expected,
                observed=requests(len(sent)),
                checks=checks,
                requests=sent,
                broken=result.broken and number == 0,
                seconds=result.seconds / len(scenario.rows),
            )
        )
    return rows


def label_requests(server: LoopbackLLM, prompts: Sequence[str]) -> tuple[str, ...]:
    """Each request the server saw, named by its prompt and attempt and its answer:
    ``#2 'Say hello.' attempt 2: 503``; a request whose last user message is none of the
    kit's prompts (a compaction's summary request) is ``another request``."""
    seen: dict[str, int] = {}
    labels = []
    for number, request in enumerate(server.requests, 1):
        prompt = request.prompt()
        if prompt in prompts:
            seen[prompt] = seen.get(prompt, 0) + 1
            name = f"{_short(prompt)} attempt {seen[prompt]}"
        else:
            name = "another request (no prompt of the kit's last: a summary request)"
        labels.append(f"#{number} {name}: {request.step or 'unanswered'}")
    return tuple(labels)


def _short(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


async def run_scenario(
    scenario: Scenario, command: Sequence[str], work: Path, profile: str = "seed"
) -> Result:
    """Run one scenario against a fresh agent started from ``command``.

    Args:
        scenario: The scenario.
        command: The agent's command line.
        work: A directory for the agent's private home, agent directory and project.
        profile: The profile it runs under (``retry.profile`` in the agent's settings).

    Returns:
        The scenario's result.
    """
    checks: list[Check] = []
    retry_events: list[Observed] = []
    error = None
    not_tested = None
    prompts: list[str] = []
    agent: Agent | None = None
    fallback = scenario.fallback
    server = LoopbackLLM(list(scenario.script), keyed=dict(scenario.keyed))
    server.by_prompt = {prompt: list(steps) for prompt, steps in scenario.by_prompt.items()}
    if fallback is not None:
        server.fallback = fallback
    retry = {**scenario.retry, "profile": profile}
    compaction = {"enabled": scenario.compaction, "keepRecentTokens": scenario.keep_recent_tokens}
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            lag = LagProbe()
            nursery.start_soon(lag.run)  # cancelled with the nursery below
            with trio.move_on_after(SCENARIO_TIMEOUT) as scope:
                async with start_agent(
                    command,
                    work,
                    server.base_url,
                    retry,
                    scenario.keys,
                    compaction,
                ) as agent:
                    cap = int(retry.get("maxAgentDelayMs", 60_000))
                    run = Run(agent, server, scenario.base_delay_ms, profile, cap, lag)
                    try:
                        await scenario.drive(run)
                    finally:
                        checks = run.checks
                        not_tested = run.not_tested
                        prompts = run.prompts
                        retry_events = run.events(0, "auto_retry_start", "auto_retry_end")
            if scope.cancelled_caught:
                error = f"timed out after {SCENARIO_TIMEOUT:g} s"
            nursery.cancel_scope.cancel()
    except* AgentError as group:
        error = "; ".join(str(exc) for exc in _leaves(group))
    if agent is not None and agent.failure is not None:
        error = agent.failure  # what it wrote, even if the driver went on without it
    # No RPC agent at all: it could not start, its output is not JSON lines, or it did
    # not answer the scenario's first command (it died, stayed silent or flooded).
    broken = error is not None and (
        agent is None or agent.failure is not None or not agent.answered
    )
    notes = list(agent.notes) if agent is not None else []
    if error is None and agent is not None and agent.exited is not None:
        notes.insert(0, agent.exited)  # a crash the checks only show as missing events
    observed = f"{retry_summary(retry_events)}; {requests(len(server.requests))}"
    return Result(
        scenario.name,
        scenario.rules,
        scenario.beyond(profile),
        scenario.expectation(profile),
        observed,
        tuple(checks),
        error,
        notes=tuple(notes),
        broken=broken,
        not_tested=not_tested,
        requests=label_requests(server, prompts),
    )


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def not_run(scenario: Scenario, broken: Result) -> list[Result]:
    """The results of a scenario the kit did not run, ``broken`` having shown the agent is
    no RPC agent.

    Args:
        scenario: The scenario not run.
        broken: The result that showed it.

    Returns:
        One result per row, each with the verdict ``error``.
    """
    return [
        Result(
            name,
            scenario.rules,
            scenario.beyond_rules,
            scenario.expected,
            "not run",
            (),
            f"not run: the agent is broken (see {broken.name})",
            ran=False,
        )
        for name in scenario.names
    ]


async def run_all(
    command: Sequence[str],
    scenarios: Sequence[Scenario],
    work: Path | None = None,
    progress: Callable[[Result], None] | None = None,
    profile: str = "seed",
) -> list[Result]:
    """Run ``scenarios`` one after another, each against a fresh agent.

    Once a scenario shows the agent is no RPC agent at all (``Result.broken``), the rest
    are not run: their results say so.

    Args:
        command: The agent's command line.
        scenarios: The scenarios, in order.
        work: A directory for the agents' files (a temporary one if not given).
        progress: Called with each result as soon as its scenario is over.
        profile: The profile they run under (``--profile``).

    Returns:
        One result per row of each scenario (most have one), in order.
    """
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="trio-session-conformance-") as temporary:
        root = work or Path(temporary)
        for scenario in scenarios:
            broken = next((r for r in results if r.broken), None)
            if broken is not None:
                rows = not_run(scenario, broken)
            else:
                began = trio.current_time()
                result = await run_scenario(scenario, command, root / scenario.name, profile)
                result = attrs.evolve(result, seconds=trio.current_time() - began)
                rows = split(scenario, result)
            for row in rows:
                results.append(row)
                if progress is not None:
                    progress(row)
    return results


def passed(results: Sequence[Result]) -> bool:
    """Whether every non-[beyond] rule held in every scenario it could test."""
    return all(r.verdict in ("pass", "beyond-differs", "not tested") for r in results)


def print_table(results: Sequence[Result], out: TextIO, verbose: bool = False) -> None:
    """One row per scenario, then the failed checks and the notes under it, and the
    requests the server saw (each named by its prompt and attempt) under a row that
    failed; the scenarios not run (the agent being broken) on one line.

    Args:
        results: The results, in order.
        out: Where to write.
        verbose: List the requests under every row.
    """
    out.write("scenario | rules | expected | observed | verdict\n")
    for r in results:
        if not r.ran:
            continue
        rules = ", ".join(
            f"{rule} [beyond]" if rule in r.beyond_rules else rule for rule in r.rules
        )
        out.write(f"{r.name} | {rules} | {r.expected} | {r.error or r.observed} | {r.verdict}\n")
        if r.not_tested is not None:
            out.write(f"    not tested: {r.not_tested}\n")
        for c in r.checks:
            if not c.ok:
                mark = "beyond the reference" if c.beyond else "FAIL"
                if r.not_tested is not None:
                    mark = "not tested"
                out.write(f"    {mark}: {c.rules}: expected {c.expected}; observed {c.observed}\n")
        for note in r.notes:
            out.write(f"    note: {note}\n")
        if verbose or r.verdict in ("FAIL", "error"):
            for request in r.requests:
                out.write(f"    request {request}\n")
    skipped = [r for r in results if not r.ran]
    broken = next((r.name for r in results if r.broken), None)
    if skipped:
        names = ", ".join(r.name for r in skipped)
        out.write(f"not run, the agent being broken (see {broken}): {names}\n")
    total = len(results)
    good = sum(r.verdict == "pass" for r in results)
    beyond = sum(r.verdict == "beyond-differs" for r in results)
    summary = f"{good} of {total} scenarios pass, {beyond} differ only beyond the reference"
    # Every other verdict is counted too, so the line adds up to the total.
    for verdict in ("not tested", "FAIL", "error"):
        count = sum(r.verdict == verdict and r.ran for r in results)
        if count:
            summary += f", {count} {verdict}"
    out.write(f"{summary}{f', {len(skipped)} not run' if skipped else ''}\n")


def print_json(results: Sequence[Result], out: TextIO, profile: str = "seed") -> None:
    """The results as one JSON document."""
    document = {
        "profile": profile,
        "passed": passed(results),
        "scenarios": [r.to_json() for r in results],
    }
    out.write(json.dumps(document, indent=2) + "\n")


def run_command(
    command: Sequence[str],
    only: Sequence[str] | None,
    as_json: bool,
    out: TextIO,
    progress: TextIO | None = None,
    profile: str = "seed",
    verbose: bool = False,
) -> int:
    """``trio-session conformance``: run, print, and exit 0 only if every rule of the
    profile held where it could be tested.

    Args:
        command: The agent's command line.
        only: The names of the scenarios to run (all if empty or ``None``).
        as_json: Print one JSON document instead of the table.
        out: Where the table or the document goes.
        progress: Where a line per scenario goes as soon as it is over (none if ``None``).
        profile: ``"seed"`` or ``"pi-1.6"``: whose rules are checked (``--profile``).
        verbose: List every request under every row of the table.

    Returns:
        The exit status: 0 if every non-[beyond] rule held, else 1.

    Raises:
        ValueError: An unknown profile or scenario name, or no command, or one that
            cannot be found.
    """
    if not command:
        raise ValueError(
            "conformance needs the agent's command after '--', for example: "
            "trio-session conformance -- trio-session rpc --no-session"
        )
    found = shutil.which(command[0])
    if found is None:
        raise ValueError(f"cannot find the agent command {command[0]!r}")
    if os.path.dirname(command[0]):
        # A path is the user's, from here: the agent runs in a scratch project directory.
        command = [os.path.abspath(found), *command[1:]]
    scenarios = select(only, profile)

    def said(result: Result) -> None:
        if progress is not None and result.ran:
            progress.write(
                f"conformance: {result.name}: {result.verdict} ({result.seconds:.1f} s)\n"
            )
            progress.flush()

    results = trio.run(run_all, command, scenarios, None, said, profile)
    if as_json:
        print_json(results, out, profile)
    else:
        print_table(results, out, verbose)
    return 0 if passed(results) else 1
