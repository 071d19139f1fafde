"""The suite itself: no hypothesis example has a deadline (a loaded machine would fail it)."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import settings


def test_no_hypothesis_example_has_a_deadline() -> None:
    """The suite's profile sets no deadline, and no test file sets one back."""
    profile = settings.default
    assert profile is not None
    assert profile.deadline is None
    setting = re.compile(r"\bdeadline=(?!None\b)")  # a keyword argument, as formatted
    offenders = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(Path(__file__).parent.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if setting.search(line)
    ]
    assert offenders == []
