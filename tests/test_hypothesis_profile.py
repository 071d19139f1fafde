"""The suite itself: no hypothesis example has a deadline, and failing examples are kept."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase


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


def test_failing_examples_are_kept_in_the_repository() -> None:
    """The profile keeps a local example database: a failure found once replays on the
    next run (also in CI, where hypothesis's own profile would keep none), in a directory
    git ignores."""
    root = Path(__file__).resolve().parent.parent
    profile = settings.default
    assert profile is not None
    database = profile.database
    assert isinstance(database, DirectoryBasedExampleDatabase)
    assert Path(database.path) == root / ".hypothesis" / "examples"
    assert ".hypothesis/" in (root / ".gitignore").read_text().splitlines()
