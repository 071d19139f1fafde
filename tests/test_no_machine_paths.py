"""Nothing in the repository names a path of the machine it was written on: not this
checkout's own absolute path, its parent folder's, nor the home directory of whoever
runs the tests (a test or a doc that found a file there would work on one machine)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_tracked_file_names_a_path_of_this_machine() -> None:
    """Each tracked text file is free of the checkout's path, its parent's and $HOME's."""
    needles = {str(ROOT) + "/", str(ROOT.parent) + "/", str(Path.home()) + "/"}
    needles = {n for n in needles if n.count("/") > 1}  # "/" alone names nothing
    found = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary (a plot) or gone
        found += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(needles) if n in text]
    assert found == []
