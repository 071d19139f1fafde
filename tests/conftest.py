"""Shared helpers: scripts, invariants, and a look at the task tree."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from trio_session import AgentSession, AutoRetryEnd, AutoRetryStart, FauxReply, SessionEvent

#: Where hypothesis keeps the examples that failed, so the next run tries them first:
#: ``.hypothesis/`` at the top of the repository (git ignores it), whatever directory
#: pytest runs in, and in CI too (hypothesis's own CI profile keeps none).
EXAMPLES = Path(__file__).resolve().parent.parent / ".hypothesis" / "examples"

# A loaded machine can stall any example for longer than hypothesis's default 200 ms
# deadline, failing a test with no defect: no example in this suite has a deadline.
# Loaded here, before any test module is imported, so every @settings inherits it.
settings.register_profile(
    "trio_session", deadline=None, database=DirectoryBasedExampleDatabase(EXAMPLES)
)
settings.load_profile("trio_session")

ERR_503 = "503 Service Unavailable"
ERR_400 = "400 Bad Request: invalid 'messages' field"
ERR_OVERFLOW = "400 prompt is too long: 213462 tokens > 200000 maximum"


def err(text: str = ERR_503, **kwargs: Any) -> FauxReply:
    """A scripted error reply."""
    return FauxReply(error=text, **kwargs)


def ok(text: str = "Hello", **kwargs: Any) -> FauxReply:
    """A scripted successful reply."""
    return FauxReply(text=text, **kwargs)


def hang() -> FauxReply:
    """A reply that streams one chunk and then never finishes."""
    return FauxReply(text="partial", hang=True)


def retry_settings(**retry: Any) -> dict[str, Any]:
    """Settings in file form with only the ``retry`` group given."""
    return {"retry": retry}


def check_retry_events(events: Sequence[SessionEvent]) -> int:
    """Every ``auto_retry_start`` is followed by exactly one ``auto_retry_end`` of its
    chain, and a chain never stays open. Returns the number of chains."""
    chains = 0
    open_chain = False
    for event in events:
        if isinstance(event, AutoRetryStart):
            if not open_chain:
                chains += 1
            open_chain = True
        elif isinstance(event, AutoRetryEnd):
            if not open_chain:  # maxRetries == 0: a chain that ends before any start
                chains += 1
            open_chain = False
    assert not open_chain, "a retry chain never ended"
    return chains


def _walk(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    yield task
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from _walk(child)


#: Tasks that live as long as the session itself, not as long as a prompt.
SERVICE_TASKS = {"trio_session._extensions.ExtensionRunner.run"}


def session_tasks() -> list[str]:
    """Names of live prompt-scoped tasks running trio_session code (none when idle)."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    return [t.name for t in _walk(root) if "trio_session" in t.name and t.name not in SERVICE_TASKS]


def assert_idle(session: AgentSession) -> None:
    """The session holds no retry state and runs no task of its own."""
    assert not session.is_running
    assert not session.is_retrying
    assert session.retry_attempt == 0
    assert session_tasks() == []


@pytest.fixture(autouse=True)
def _private_config_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads or writes the user's own files: the XDG directories point into a
    temporary directory (child processes inherit it), and pi's agent directory is unset.

    ``set_auto_retry`` writes the global settings file even when no file set the key,
    so without this a test could change the real ``~/.config/trio-session``.
    """
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
