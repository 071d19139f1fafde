"""Plot cancellation latency against N from a saved ``cancel_latency.json``.

Run from the repository root (needs matplotlib: the ``bench`` extra)::

    python benchmarks/plot.py                          # results/latency_vs_n.png
    python benchmarks/plot.py path/to/cancel_latency.json --output latency.png

Three log-log panels against N: the median and the p99 latency of every series,
and the total time to cancel all N one after another; solid lines for trio
(floors and sessions), dashed for asyncio.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _bench import RESULTS_DIR

STYLE = {  # series key → (colour, marker)
    "floor_scope": ("black", "o"),
    "floor_nursery": ("dimgray", "s"),
    "trio_event": ("silver", "v"),
    "session_abort_retry": ("tab:blue", "o"),
    "session_abort_retry_events": ("tab:cyan", "^"),
    "session_abort": ("tab:red", "D"),
    "asyncio_task_cancel": ("black", "x"),
    "asyncio_ref_abort_retry": ("tab:blue", "x"),
    "asyncio_ref_abort": ("tab:red", "x"),
}


def plot(data: dict[str, Any], output: Path) -> Path:
    """Draw the figure for ``data`` (a cancel_latency result) into ``output``."""
    try:
        # Optional (the ``bench`` extra); the ignore keeps mypy quiet where it is absent.
        import matplotlib  # type: ignore[import-not-found, unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        msg = "plot.py needs matplotlib: pip install -e '.[bench]'"
        raise SystemExit(msg) from None
    sizes = sorted(int(n) for n in data["results"])
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.6))
    panels = (
        ("median_us", "median latency", "µs from the cancelling call to the observer"),
        ("p99_us", "p99 latency", "µs"),
        ("total_ms", "total: cancel all N, one after another", "ms"),
    )
    for ax, (stat, title, ylabel) in zip(axes, panels, strict=True):
        for key, meta in data["series"].items():
            points = [
                (n, data["results"][str(n)][key][stat])
                for n in sizes
                if key in data["results"][str(n)]
            ]
            if not points:
                continue
            colour, marker = STYLE.get(key, ("tab:green", "."))
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                label=meta["label"],
                color=colour,
                marker=marker,
                linestyle="--" if meta["runtime"] == "asyncio" else "-",
                linewidth=1.4,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N sessions in backoff")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    machine = data["machine"]
    fig.suptitle(
        f"Cancellation latency vs N — {machine['cpu']}, {machine['nproc']} CPUs,"
        f" Python {machine['python']}, trio {machine['trio']}"
        f" (F ≈ {data['unit']['F_ns'] / 1e3:.1f} µs)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    """Read the JSON, write the PNG, print its path."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("input", nargs="?", type=Path, default=RESULTS_DIR / "cancel_latency.json")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "latency_vs_n.png")
    args = parser.parse_args(argv)
    data = json.loads(args.input.read_text(encoding="utf-8"))
    print(plot(data, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
