"""Plot a saved ``run.json``: every figure against its goal, on one readable chart.

Run from the repository root (needs matplotlib: the ``bench`` extra)::

    python benchmarks/plot_run.py                     # results/run.json → results/goals.png
    python benchmarks/plot_run.py path/to/run.json --output goals.png

Each goal is a row at 1 (the vertical line); its bar runs from there to the
figure divided by the goal (for a "higher is better" goal, the goal divided by
the figure): green and to the left when the goal is met, red and to the right
when not. The x axis is logarithmic: 0.5 is twice as good as needed, 2 twice as
bad.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _bench import RESULTS_DIR
from _goals import GOALS


def score(figure: dict[str, Any]) -> float:
    """How far the figure is from its goal: ≤ 1 when met, on either kind of goal."""
    value = float(figure["value"])
    target = float(figure["target"])
    if figure["better"] == "lower":
        return value / target
    return target / value if value > 0 else math.inf


def plot(run: dict[str, Any], output: Path) -> Path:
    """Draw the chart for ``run`` (a ``run.py`` result) into ``output``."""
    try:
        # Optional (the ``bench`` extra); the ignore keeps mypy quiet where it is absent.
        import matplotlib  # type: ignore[import-not-found,unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        sys.exit("matplotlib is needed: pip install -e '.[bench]'")

    figures = [f for f in run["figures"] if not math.isnan(float(f["value"]))]
    figures.reverse()  # the first goal on top
    labels = [f"{f['key']}  ({GOALS[f['key']].wanted})" for f in figures]
    scores = [score(f) for f in figures]
    colours = ["tab:green" if s <= 1 else "tab:red" for s in scores]

    fig, ax = plt.subplots(figsize=(9, 0.42 * len(figures) + 1.4), dpi=110)
    rows = range(len(figures))
    ax.barh(rows, [s - 1.0 for s in scores], left=1.0, color=colours, height=0.6)
    ax.set_xscale("log")
    low = min([*scores, 0.1]) / 1.5
    high = max([*scores, 2.0]) * 1.5
    ax.set_xlim(low, high)
    ax.axvline(1.0, color="black", linewidth=1.2)
    ax.set_yticks(list(rows), labels, fontsize=10)
    for row, (figure, s) in enumerate(zip(figures, scores, strict=True)):
        unit = figure["unit"]
        shown = f"{figure['value']:.3g}{unit}" if unit == "×" else f"{figure['value']:.3g} {unit}"
        if s >= 1:
            ax.text(s * 1.06, row, shown, va="center", ha="left", fontsize=9)
        else:
            ax.text(s / 1.06, row, shown, va="center", ha="right", fontsize=9)
    ax.set_xlabel("figure ÷ goal (log scale; left of the line = goal met)", fontsize=10)
    commit = run.get("commit") or "?"
    ax.set_title(
        f"Issue 15's goals, run of {run['started'][:16].replace('T', ' ')} UTC (commit {commit})",
        fontsize=11,
    )
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    plt.close(fig)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", type=Path, default=RESULTS_DIR / "run.json")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "goals.png")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text(encoding="utf-8"))
    print(plot(run, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
