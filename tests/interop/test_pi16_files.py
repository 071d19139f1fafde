"""Session files against today's pi (1.6.0), both ways (issue 27, acceptance 3).

pi 1.6.0's own ``SessionManager`` (``dist/core/session-manager.js``, run by node 22 through
``pi_session_files.mjs``) reads files we wrote, and we read files pi 1.6.0 wrote when the
interop scenario really drove it over RPC (``driver16.mjs``: a retried 503, a model change,
a bash run, a clone and a fork), with the same context. pi's context is ours plus its
``system`` messages, and its assistant messages carry the fields docs/storage.md lists
after ``<!-- pi16-message-fields -->``: nothing else is set aside.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import trio
import trio.testing

from tests.interop.test_pi_files import random_session
from trio_session import message_to_json
from trio_session.store._entries import (
    ContextEditEntry,
    MessageEntry,
    ModelChangeEntry,
    SystemMessageEntry,
)
from trio_session.store._history import load_session
from trio_session.store._loaded import LoadedSession, runtime_context, session_context

SCRIPT = Path(__file__).with_name("pi_session_files.mjs")
STORAGE_DOCS = Path(__file__).resolve().parents[2] / "docs" / "storage.md"


def unmodelled_fields() -> tuple[str, ...]:
    """The dotted paths docs/storage.md lists as pi 1.6.0 message fields we do not model."""
    text = STORAGE_DOCS.read_text().split("<!-- pi16-message-fields -->", 1)[1]
    sentence = text.split(".\n", 1)[0]
    return tuple(re.findall(r"`([A-Za-z.]+)`", sentence))


def pi16(node22: Path, pi16_package: Path, home: Path, mode: str, *targets: Path) -> Any:
    """What pi 1.6.0's SessionManager makes of ``targets`` (see pi_session_files.mjs)."""
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(node22), str(SCRIPT), str(pi16_package), mode, *map(str, targets)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _without(message: dict[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(message))
    for path in paths:
        *parents, last = path.split(".")
        holder: Any = out
        for key in parents:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(last, None)
    return out


def pis_context(seen: dict[str, Any]) -> list[dict[str, Any]]:
    """pi's ``buildSessionContext`` messages without its system messages and without the
    message fields docs/storage.md lists as not modelled by us."""
    fields = unmodelled_fields()
    return [_without(m, fields) for m in seen["context"]["messages"] if m["role"] != "system"]


def ours(loaded: LoadedSession) -> list[dict[str, Any]]:
    """Our context, as JSON."""
    return [message_to_json(m) for m in session_context(loaded)]


def test_the_docs_list_the_unmodelled_fields() -> None:
    """docs/storage.md names the pi 1.6.0 message fields the comparison sets aside."""
    assert unmodelled_fields() == ("providerThinkingLevel", "diagnostics", "endTurn", "deferred")


def test_we_read_pi16s_files(
    transcripts16: dict[str, dict[str, Any]], node22: Path, pi16_package: Path, tmp_path: Path
) -> None:
    """Every file pi 1.6.0 wrote while driven over RPC (its session, the clone, the fork):
    we read every entry without a warning, its system messages and context edits as
    their own types, keep every entry object whole, and rebuild pi's context exactly
    (the retried 503 left out by pi's context_edit)."""
    sessions = Path(transcripts16["pi"]["work"]) / "agent" / "sessions"
    paths = sorted(sessions.rglob("*.jsonl"))
    assert len(paths) >= 2  # the session and the files its clone and fork made
    seen_kinds: set[type[Any]] = set()
    for path in paths:
        seen = pi16(node22, pi16_package, tmp_path / "home", "read", path)
        loaded = load_session(path)
        assert loaded.warnings == (), path.name
        assert ours(loaded) == pis_context(seen), path.name
        assert [loaded.raw[e.id] for e in loaded.entries] == seen["entries"], path.name
        assert loaded.leaf_id == seen["leafId"], path.name
        # pi's context_edit already left the retried attempt out: R-20 drops nothing more.
        assert runtime_context(loaded) == session_context(loaded), path.name
        seen_kinds |= {type(e) for e in loaded.entries}
    assert {SystemMessageEntry, ContextEditEntry, ModelChangeEntry, MessageEntry} <= seen_kinds
    main = load_session(paths[0])
    roles = {e.message.role for e in main.entries if isinstance(e, MessageEntry)}
    assert "bashExecution" in roles
    edits = [e for e in main.entries if isinstance(e, ContextEditEntry)]
    assert edits
    assert all(e.replacement is None for e in edits)


def test_pi16_reads_our_files(node22: Path, pi16_package: Path, tmp_path: Path) -> None:
    """On 30 random session trees we wrote (every entry type, failures, compactions,
    branches), pi 1.6.0's buildSessionContext, session name and branch equal ours."""
    paths = [tmp_path / f"random-{seed}.jsonl" for seed in range(30)]
    for seed, path in enumerate(paths):
        random_session(path, seed)
    seen = pi16(node22, pi16_package, tmp_path / "home", "read-many", *paths)
    for path, theirs in zip(paths, seen, strict=True):
        loaded = load_session(path)
        assert pis_context(theirs) == ours(loaded), path.name
        assert theirs["context"]["thinkingLevel"] == loaded.thinking_level, path.name
        assert theirs["sessionName"] == loaded.session_name, path.name
        assert [e["id"] for e in theirs["branch"]] == [e.id for e in loaded.branch()], path.name


def _write_pi16_profile_session(path: Path) -> list[dict[str, Any]]:
    """A session run under retry.profile "pi-1.6": an overflow with nothing to compact, a
    503 retried, a length-cut reply compacted and retried; its live context."""
    from trio_session import FauxProvider, FauxReply, Model, Usage, open_session

    model = Model(id="small", provider="faux", context_window=1000, max_tokens=100)
    provider = FauxProvider(
        [
            FauxReply(error="400 prompt is too long: 213462 tokens > 200000 maximum"),
            FauxReply(error="503 Service Unavailable"),
            FauxReply(text="a1"),
            FauxReply(text="cut", stop_reason="length", usage=Usage(output=40)),
            FauxReply(text="the summary"),
            FauxReply(text="a2"),
        ]
    )
    live: list[dict[str, Any]] = []

    async def run() -> None:
        # keepRecentTokens 3: pi 1.6.0's cut finds nothing to compact after "huge" alone,
        # and "huge" to summarise before "q1" after the length cut (R-56a)
        settings = {"retry": {"profile": "pi-1.6"}, "compaction": {"keepRecentTokens": 3}}
        async with open_session(provider, model, settings=settings, history=path) as session:
            for text in ("huge", "q1", "q2"):
                await session.prompt(text)
            live.extend(message_to_json(m) for m in session.messages)

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))
    assert provider.remaining == 0
    return live


def test_pi16_builds_the_context_of_our_pi16_profile_file(
    node22: Path, pi16_package: Path, tmp_path: Path
) -> None:
    """R-56e: a file we wrote under retry.profile "pi-1.6" (an overflow with nothing to
    compact, a retried 503, a length cut compacted and retried) holds pi's context_edit
    entries; pi 1.6.0's SessionManager builds the same context as our resume, and that
    is the live session's context."""
    path = tmp_path / "pi16-profile.jsonl"
    live = _write_pi16_profile_session(path)
    loaded = load_session(path)
    edits = [e for e in loaded.entries if isinstance(e, ContextEditEntry)]
    assert len(edits) == 3  # the overflow error, the 503, the length-cut reply
    assert all(e.replacement is None for e in edits)
    seen = pi16(node22, pi16_package, tmp_path / "home", "read", path)
    assert [loaded.raw[e.id] for e in loaded.entries] == seen["entries"]
    assert pis_context(seen) == ours(loaded)
    assert [message_to_json(m) for m in runtime_context(loaded)] == live
    assert ours(loaded) == live
