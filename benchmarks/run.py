"""Every measure of issues 15 and 30, each against its baseline, in one command.

Run from the repository root::

    python benchmarks/run.py               # the full run, about 10 minutes on 2 cores
    python benchmarks/run.py --quick       # every benchmark at small sizes (CI's smoke test)
    python benchmarks/run.py --only startup,streaming

Each benchmark module (``startup``, ``rpc_latency``, ``session_costs``,
``streaming``, ``peers``) runs in a fresh interpreter of its own, one after
another, so one module's garbage, imports or memory do not weigh on the next one;
the baselines of a measure are taken inside the same process as the measure.

How a verdict is reduced (issue 30): every timed figure is a ratio of medians in
one unit (µs, ms, bytes) of adjacent, alternating blocks of this run — one ratio
per round, at least three rounds — and the figure is the median of the rounds,
printed with their spread. F (one checkpoint) is only the unit of the p99 tails;
nothing is divided by F before a ratio. Each row prints the goal as it was
worded, the figure, the verdict (``met``, or ``NOT MET`` and by what factor) and
the raw-Trio floor of the same run. The peer table (asyncio, node, and pi 0.73.1's
RPC bytes) follows, shown and not judged. The whole run is written to
``benchmarks/results/run.json`` (or ``--json``), and the tables as Markdown beside it
(``run.md``).

``--quick`` shrinks every size. Its figures are not verdicts — the table says
"ran" — it only proves that every benchmark still runs. The exit status is 1 if
a benchmark failed or a goal got no figure; with ``--strict`` (full runs only)
also if a goal was missed or had too few rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _bench import RESULTS_DIR, machine_info, unit_f_ns
from _goals import GOALS, MIN_ROUNDS, Figure

HERE = Path(__file__).resolve().parent

#: Benchmark modules, in the order they run: start-up first, while the process
#: table is quiet and before anything heats the page cache differently.
MODULES = ("startup", "rpc_latency", "session_costs", "streaming", "peers")


def _child(module: str, quick: bool, output: Path) -> None:
    """In the child interpreter: run one module's ``measure`` and write its figures."""
    sys.path.insert(0, str(HERE))
    mod = __import__(module)
    figures: list[Figure] = mod.measure(quick)
    output.write_text(json.dumps([f.as_json() for f in figures], indent=2), encoding="utf-8")


def _run_module(module: str, quick: bool) -> tuple[list[dict[str, Any]], str | None, float]:
    """Run ``module`` in a fresh interpreter: its figures, the error if it failed, and the
    wall time it took."""
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "figures.json"
        argv = [sys.executable, str(HERE / "run.py"), "--child", module, "--output", str(output)]
        if quick:
            argv.append("--quick")
        start = time.perf_counter()
        proc = subprocess.run(argv, check=False, stdin=subprocess.DEVNULL)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            return [], f"exited with status {proc.returncode}", took
        try:
            figures: list[dict[str, Any]] = json.loads(output.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return [], f"wrote no figures ({exc})", took
        return figures, None, took


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _verdict(figure: dict[str, Any], quick: bool) -> str:
    """``met``, ``NOT MET: 2.2× the goal``, or why there is no verdict."""
    goal = GOALS[figure["key"]]
    if goal.target is None:
        return "peer (not judged)"
    if _nan(figure["value"]):
        return "skipped"
    if quick:
        return "ran"
    if goal.timed and len(figure["rounds"]) < MIN_ROUNDS:
        return f"no verdict: {len(figure['rounds'])} round(s), {MIN_ROUNDS} needed"
    if goal.met(figure["value"]):
        return "met"
    return f"NOT MET: {goal.miss(figure['value']):.2f}× the goal"


def _number(value: float, unit: str) -> str:
    return f"{value:.3g}{unit}" if unit == "×" else f"{value:.3g} {unit}"


def _value(figure: dict[str, Any]) -> str:
    """``1.68× [1.41–1.93] (4 rounds)``."""
    value = figure["value"]
    if _nan(value):
        return "—"
    unit = figure["unit"]
    rounds = figure["rounds"]
    if len(rounds) == 1:
        return _number(value, unit) + " (1 round)"
    low, high = figure["spread"]
    return f"{_number(value, unit)} [{low:.3g}–{high:.3g}] ({len(rounds)} rounds)"


def _judged(figures: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in figures if GOALS[f["key"]].target is not None]


def _peers(figures: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in figures if GOALS[f["key"]].target is None]


def _table(figures: Sequence[dict[str, Any]], quick: bool) -> str:
    """Every judged row: its wording, the figure (median [min–max] of its rounds), the
    verdict, the floor of the same run and the evidence, one block per row."""
    lines = []
    for figure in _judged(figures):
        goal = GOALS[figure["key"]]
        lines.append(f"{figure['key']}: {goal.wording}")
        lines.append(f"    {goal.wanted:<8} found {_value(figure)}  →  {_verdict(figure, quick)}")
        if figure.get("floor"):
            lines.append(f"    floor (same run): {figure['floor']}")
        lines.append(f"    {figure['text']}")
    peers = _peers(figures)
    if peers:
        lines.append("")
        lines.append("peer table (each row names its baseline, same run; shown, not judged):")
        for figure in peers:
            lines.append(f"    {_value(figure):<28} {figure['text']}")
    return "\n".join(lines)


def markdown(figures: Sequence[dict[str, Any]], quick: bool) -> str:
    """The verdict table and the peer table of a run as Markdown, for docs/benchmarks.md."""
    lines = ["| goal, as worded | found: median [min–max] (rounds) | verdict | floor, same run |"]
    lines.append("|---|---:|---|---|")
    for figure in _judged(figures):
        goal = GOALS[figure["key"]]
        verdict = _verdict(figure, quick)
        shown = f"**{verdict}**" if verdict.startswith("NOT MET") else verdict
        wording = f"{goal.wording} ({goal.wanted})".replace("|", "\\|")
        floor = str(figure.get("floor", "")).replace("|", "\\|")
        lines.append(f"| {wording} | {_value(figure)} | {shown} | {floor} |")
    peers = _peers(figures)
    if peers:
        lines += ["", "| peer (its baseline) | median [min–max] (rounds) | evidence |"]
        lines.append("|---|---:|---|")
        for figure in peers:
            text = figure["text"].replace("|", "\\|")
            lines.append(f"| {GOALS[figure['key']].measure} | {_value(figure)} | {text} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="small sizes: a smoke test, not verdicts"
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated modules (of {', '.join(MODULES)})"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="where to write the run (default results/run.json)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is not met")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        _child(args.child, args.quick, args.output)
        return 0

    modules = [m.strip() for m in args.only.split(",") if m.strip()] or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s): {', '.join(unknown)} (choose from {', '.join(MODULES)})")

    started = datetime.now(UTC)
    machine = machine_info()
    f_before = unit_f_ns()
    print(
        f"trio_session benchmarks{' (quick)' if args.quick else ''}, {started:%Y-%m-%d %H:%M} UTC"
    )
    print(
        f"{machine['nproc']} CPUs ({machine['cpu']}), Python {machine['python']},"
        f" trio {machine['trio']}, source {machine['trio_session_source']},"
        f" load {machine['loadavg_at_start']}"
    )
    print(
        f"F = {f_before / 1000:.2f} µs (one trio.lowlevel.checkpoint(), this process)\n", flush=True
    )

    figures: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    timings: dict[str, float] = {}
    for module in modules:
        print(f"== {module}", flush=True)
        found, error, took = _run_module(module, args.quick)
        timings[module] = took
        if error is not None:
            failures[module] = error
            print(f"   FAILED: {error}", flush=True)
        else:
            figures.extend(found)
            print(f"   {len(found)} figure(s) in {took:.1f} s", flush=True)

    found_keys = {f["key"] for f in figures}
    missing = (
        []
        if args.only
        else [k for k, g in GOALS.items() if k not in found_keys and g.target is not None]
    )
    order = list(GOALS)
    figures.sort(key=lambda f: order.index(f["key"]))

    print()
    print(_table(figures, args.quick))
    verdicts = [_verdict(f, args.quick) for f in _judged(figures)]
    met = sum(1 for v in verdicts if v == "met")
    judged = sum(1 for v in verdicts if v == "met" or v.startswith("NOT MET"))
    print()
    if args.quick:
        print(
            f"quick run: {len(figures)} figure(s) from {len(modules) - len(failures)}"
            " module(s); timings not judged"
        )
    else:
        print(f"{met} of {judged} goals met ({len(verdicts) - judged} without a verdict)")
    for module, error in failures.items():
        print(f"benchmark {module} failed: {error}")
    for key in missing:
        print(f"no figure for goal {key} ({GOALS[key].measure})")

    record = {
        "started": started.isoformat(timespec="seconds"),
        "quick": args.quick,
        "commit": _commit(),
        "machine": machine,
        "unit_f_ns": {"before": f_before, "after": unit_f_ns()},
        "module_seconds": timings,
        "failures": failures,
        "missing": missing,
        "figures": figures,
    }
    target = args.json or RESULTS_DIR / ("run-quick.json" if args.quick else "run.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    table = target.with_suffix(".md")
    table.write_text(markdown(figures, args.quick), encoding="utf-8")
    print(f"written: {os.path.relpath(target)}, {os.path.relpath(table)}")

    if failures or missing:
        return 1
    if args.strict and not args.quick and met < len(verdicts):
        return 1
    return 0


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
