"""The results table of docs/conformance.md, made by running the kit.

``python -m trio_session.conformance.report --pi073 DIR --pi16 DIR --node22 NODE`` runs
the kit against trio-session's own ``rpc`` under both profiles, pi 0.73.1 under
``--profile seed`` and pi 1.6.0 under ``--profile pi-1.6``, and prints the table: one
row per scenario, one column per agent and profile (``—`` where a scenario does not run
under that profile). ``--only-pi`` leaves trio-session's columns out (``—``).
tests/interop/test_conformance_pi.py runs the pis and checks the table's pi columns;
tests/test_conformance.py runs ours and checks ours.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from ._rows import ALL_SCENARIOS
from ._run import run_all, scenarios_for

#: The table's columns: (heading, agent, profile).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("trio-session, seed", "ours", "seed"),
    ("pi 0.73.1, seed", "pi073", "seed"),
    ("trio-session, pi-1.6", "ours", "pi-1.6"),
    ("pi 1.6.0, pi-1.6", "pi16", "pi-1.6"),
)
#: Where the table starts in docs/conformance.md.
MARKER = "<!-- conformance-results -->"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \|(.*)\|$")

Verdicts = Mapping[str, str]  # scenario → verdict


def our_command() -> list[str]:
    """trio-session's own agent, in RPC mode."""
    return [sys.executable, "-m", "trio_session", "rpc", "--no-session"]


def pi_command(package: Path, node: str = "node") -> list[str]:
    """pi's agent in RPC mode, from its installed package directory."""
    return [node, str(package / "dist" / "cli.js"), "--mode", "rpc", "--no-session"]


def run_verdicts(command: Sequence[str], profile: str) -> dict[str, str]:
    """Run every scenario of ``profile`` against ``command``; scenario → verdict.

    Args:
        command: The agent's command line.
        profile: ``"seed"`` or ``"pi-1.6"``.

    Returns:
        Each scenario's verdict, in the kit's order.
    """
    results = trio.run(run_all, command, scenarios_for(profile), None, None, profile)
    return {r.name: r.verdict for r in results}


def render(columns: Mapping[tuple[str, str], Verdicts]) -> str:
    """The markdown table: a row per scenario, a column per (agent, profile) of ``COLUMNS``.

    Args:
        columns: (agent, profile) → that column's verdicts; a missing column, or a
            scenario missing from one, shows ``—``.

    Returns:
        The table, with a line after each row.
    """
    lines = [
        "| Scenario | " + " | ".join(heading for heading, _, _ in COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for name in (name for scenario in ALL_SCENARIOS for name in scenario.names):
        cells = [columns.get((agent, profile), {}).get(name, "—") for _, agent, profile in COLUMNS]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """The table of docs/conformance.md (after ``MARKER``), as ``render`` takes it.

    Args:
        text: The page.

    Returns:
        (agent, profile) → scenario → verdict, without the ``—`` cells.
    """
    columns: dict[tuple[str, str], dict[str, str]] = {(a, p): {} for _, a, p in COLUMNS}
    for line in text.split(MARKER, 1)[1].splitlines():
        match = _ROW.match(line.strip())
        if match is None:
            continue
        cells = [cell.strip() for cell in match.group(2).split("|")]
        for (_, agent, profile), cell in zip(COLUMNS, cells, strict=True):
            if cell != "—":
                columns[(agent, profile)][match.group(1)] = cell
    return columns


def main(argv: Sequence[str] | None = None) -> int:
    """Run the kit against the agents named and print the table."""
    parser = argparse.ArgumentParser(prog="python -m trio_session.conformance.report")
    parser.add_argument("--pi073", type=Path, help="pi 0.73.1's package directory")
    parser.add_argument("--pi16", type=Path, help="pi 1.6.0's package directory")
    parser.add_argument("--node22", default="node", help="the node that runs pi 1.6.0")
    parser.add_argument("--only-pi", action="store_true", help="leave trio-session out")
    args = parser.parse_args(argv)
    columns: dict[tuple[str, str], Verdicts] = {}
    if not args.only_pi:
        for profile in ("seed", "pi-1.6"):
            columns[("ours", profile)] = run_verdicts(our_command(), profile)
    if args.pi073 is not None:
        columns[("pi073", "seed")] = run_verdicts(pi_command(args.pi073), "seed")
    if args.pi16 is not None:
        command = pi_command(args.pi16, args.node22)
        columns[("pi16", "pi-1.6")] = run_verdicts(command, "pi-1.6")
    sys.stdout.write(render(columns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
