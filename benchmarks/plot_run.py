"""Plot a saved ``run.json``: every figure against its goal; the streamed reply's growth.

Run from the repository root (needs matplotlib: the ``bench`` extra)::

    python benchmarks/plot_run.py       # results/run.json → results/goals.png, stream.png
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

#: Pixels per inch of the saved charts: a 9-inch chart is 1485 pixels wide, so it stays
#: sharp drawn across the docs' content column, on a wide or a high-density screen.
DPI = 165


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

    fig, ax = plt.subplots(figsize=(9, 0.42 * len(figures) + 1.4), dpi=DPI)
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
