"""Plot a saved ``run.json``: every figure against its goal; the streamed reply's growth.

Run from the repository root (needs matplotlib: the ``bench`` extra)::

    python benchmarks/plot_run.py       # results/run.json → results/goals.png, stream.png
    python benchmarks/plot_run.py path/to/run.json --output goals.png

Each goal is a row at 1 (the vertical line); its bar runs from there to the
figure (the median of its rounds) divided by the goal (for a "higher is better"
goal, the goal divided by the figure): green and to the left when the goal is
met, red and to the right when not; a black whisker spans the best to the worst
round. Peer rows are not drawn (they have no goal). The x axis is logarithmic:
0.5 is twice as good as needed, 2 twice as bad. The legend is under the chart.
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

#: Pixels per inch of the saved charts: a 9-inch chart is 1485 pixels wide, so it stays
#: sharp drawn across the docs' content column, on a wide or a high-density screen.
DPI = 165


def score(figure: dict[str, Any], value: float | None = None) -> float:
    """How far ``value`` (by default the figure) is from its goal: ≤ 1 when met."""
    value = float(figure["value"] if value is None else value)
    target = float(figure["target"])
    if figure["better"] == "lower":
        return value / target
    return target / value if value > 0 else math.inf


def _spread(figure: dict[str, Any]) -> tuple[float, float]:
    """The scores of the best and the worst round (an older run.json: the figure twice)."""
    rounds = figure.get("rounds") or [figure["value"]]
    scores = [score(figure, r) for r in rounds]
    return min(scores), max(scores)


def plot(run: dict[str, Any], output: Path) -> Path:
    """Draw the chart for ``run`` (a ``run.py`` result) into ``output``."""
    try:
        # Optional (the ``bench`` extra); the ignore keeps mypy quiet where it is absent.
        import matplotlib  # type: ignore[import-not-found,unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
        from matplotlib.lines import Line2D  # type: ignore[import-not-found,unused-ignore]
        from matplotlib.patches import Patch  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        sys.exit("matplotlib is needed: pip install -e '.[bench]'")

    figures = [
        f
        for f in run["figures"]
        if f.get("target") is not None and not math.isnan(float(f["value"]))
    ]
    figures.reverse()  # the first goal on top
    labels = [f"{f['key']}  ({GOALS[f['key']].wanted})" for f in figures]
    scores = [score(f) for f in figures]
    spreads = [_spread(f) for f in figures]
    colours = ["tab:green" if s <= 1 else "tab:red" for s in scores]

    fig, ax = plt.subplots(figsize=(9, 0.42 * len(figures) + 2.2), dpi=DPI)  # legend below
    rows = range(len(figures))
    ax.barh(rows, [s - 1.0 for s in scores], left=1.0, color=colours, height=0.6)
    for row, (low, high) in zip(rows, spreads, strict=True):
        if high > low:
            ax.plot([low, high], [row, row], color="black", linewidth=1.4)
            ax.plot([low, high], [row, row], "|", color="black", markersize=7)
    ax.set_xscale("log")
    every = [*scores, *(x for pair in spreads for x in pair)]
    low = min([*every, 0.1]) / 3.0
    high = max([*every, 2.0]) * 2.2
    ax.set_xlim(low, high)
    ax.axvline(1.0, color="black", linewidth=1.2)
    ax.set_yticks(list(rows), labels, fontsize=10)
    for row, (figure, s, spread) in enumerate(zip(figures, scores, spreads, strict=True)):
        unit = figure["unit"]
        shown = f"{figure['value']:.3g}{unit}" if unit == "×" else f"{figure['value']:.3g} {unit}"
        if s >= 1:
            ax.text(max(s, spread[1]) * 1.06, row, shown, va="center", ha="left", fontsize=9)
        else:
            ax.text(min(s, spread[0]) / 1.06, row, shown, va="center", ha="right", fontsize=9)
    ax.set_xlabel("figure ÷ goal (log scale; left of the line = goal met)", fontsize=10)
    commit = run.get("commit") or "?"
    ax.set_title(
        f"Every goal, run of {run['started'][:16].replace('T', ' ')} UTC (commit {commit})",
        fontsize=11,
    )
    height = 0.42 * len(figures) + 2.2
    fig.legend(
        handles=[
            Patch(color="tab:green", label="met: median of the rounds"),
            Patch(color="tab:red", label="not met: median of the rounds"),
            Line2D([], [], color="black", marker="|", label="best to worst round"),
            Line2D([], [], color="black", linewidth=1.2, label="the goal"),
        ],
        loc="lower center",
        ncol=4,
        fontsize=9,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.45 / height, 1, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, bbox_inches="tight")
    plt.close(fig)
    return output


def plot_stream(run: dict[str, Any], output: Path) -> Path | None:
    """Time against chunks for the streamed reply, session and provider alone, log-log,
    with the slope of linear growth for reference; ``None`` if the run has no such figure."""
    figure = next((f for f in run["figures"] if f["key"] == "stream.growth"), None)
    if figure is None or "median_s" not in figure["detail"]:
        return None
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]

    sizes = figure["detail"]["sizes"]
    medians = figure["detail"]["median_s"]
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=DPI)
    for who, colour, label in (
        ("session", "tab:blue", "through session.prompt() (one subscribe() callback)"),
        ("provider", "black", "provider alone"),
    ):
        ax.plot(
            sizes, [medians[f"{who} {n}"] for n in sizes], marker="o", color=colour, label=label
        )
    first = medians[f"session {sizes[0]}"]
    ax.plot(
        sizes,
        [first * n / sizes[0] for n in sizes],
        linestyle=":",
        color="grey",
        label="linear from the first point",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in one streamed reply", fontsize=10)
    ax.set_ylabel("seconds (median)", fontsize=10)
    ax.set_title("A streamed reply grows linearly with its chunks", fontsize=11)
    ax.legend(fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", type=Path, default=RESULTS_DIR / "run.json")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "goals.png")
    parser.add_argument("--stream-output", type=Path, default=RESULTS_DIR / "stream.png")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text(encoding="utf-8"))
    print(plot(run, args.output))
    stream = plot_stream(run, args.stream_output)
    if stream is not None:
        print(stream)
    return 0


if __name__ == "__main__":
    sys.exit(main())
