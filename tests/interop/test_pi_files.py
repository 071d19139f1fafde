"""Session files against pi itself: its own SessionManager (run under node) reads ours, and we
read its own, with the same context and nothing dropped (issue 12).

``pi_session_files.mjs`` (beside this file) imports ``dist/core/session-manager.js`` from
the installed package and prints what pi makes of a file: ``buildSessionContext()``,
``getSessionName()``, the leaf, ``getEntries()`` and ``getBranch()``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    CompactionResult,
    FauxProvider,
    FauxReply,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_to_json,
    open_session,
)
from trio_session._agent.compactors import Compaction, split_turns
from trio_session._core.messages import (
    BashExecutionMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    Message,
    ThinkingContent,
    Usage,
)
from trio_session._settings.store import CompactionSettings
from trio_session.store._entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
)
from trio_session.store._fork import fork_session
from trio_session.store._history import load_session
from trio_session.store._loaded import LoadedSession, runtime_context, session_context
from trio_session.store._session_file import SessionFile

SCRIPT = Path(__file__).with_name("pi_session_files.mjs")
T0 = 1_750_000_000.0
PIXEL = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
ERR_503 = "503 Service Unavailable"
ERR_OVERFLOW = "400 prompt is too long: 213462 tokens > 200000 maximum"


def pi(pi_package: Path, home: Path, mode: str, *targets: Path) -> Any:
    """Run the node script; what pi printed."""
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        ["node", str(SCRIPT), str(pi_package), mode, *map(str, targets)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},  # pi's own directory stays the test's
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ours(loaded: LoadedSession) -> list[dict[str, Any]]:
    """Our ``buildSessionContext`` equivalent, as JSON."""
    return [message_to_json(m) for m in session_context(loaded)]


def assistant(text: str, timestamp: int, **fields: Any) -> AssistantMessage:
    """An answer with every field pi writes."""
    return AssistantMessage(
        content=[TextContent(text)],
        usage=Usage(100, 20, 1, 2, Cost(0.5, 0.25, 0.125, 0.0625, 0.9375)),
        provider="anthropic",
        model="claude-x",
        api="anthropic-messages",
        timestamp=timestamp,
        **fields,
    )


# -- (a) pi reads what we write ----------------------------------------------------------------


def test_pi_reads_our_file(pi_package: Path, tmp_path: Path) -> None:
    """Every entry type we write, a retried error, a compaction, images, a bash execution and a
    branch with its summary: pi's buildSessionContext equals ours, model, thinking level and
    name included; our runtime context is that without the retried error (R-20)."""
    path = tmp_path / "ours.jsonl"
    with SessionFile.create(path, cwd="/src/app", clock=lambda: T0) as file:
        first = file.append_message_nowait(UserMessage("Hello", timestamp=1000))
        file.append_message_nowait(assistant("Hi!", 2000, response_id="msg_1"))
        file.append_model_change_nowait("openai", "gpt-4o")
        file.append_thinking_level_change_nowait("medium")
        file.append_message_nowait(
            UserMessage((TextContent("What is it?"), ImageContent(PIXEL, "image/png")), 3000)
        )
        file.append_message_nowait(
            AssistantMessage(
                content=[
                    ThinkingContent("Let me look.", thinking_signature="sig-1"),
                    ToolCall("call_1", "read", {"path": "a.png"}),
                ],
                stop_reason="toolUse",
                provider="openai",
                model="gpt-4o",
                api="openai-completions",
                timestamp=4000,
            )
        )
        file.append_message_nowait(
            ToolResultMessage("call_1", "read", (TextContent("a red pixel"),), timestamp=5000)
        )
        file.append_message_nowait(BashExecutionMessage("ls", "a.png\n", 0, timestamp=6000))
        file.append_message_nowait(CustomMessage("ext", "custom role", timestamp=6500))
        kept = file.append_message_nowait(UserMessage("Summarize.", timestamp=7000))
        file.append_message_nowait(
            AssistantMessage(stop_reason="error", error_message=ERR_503, timestamp=8000)
        )
        file.append_message_nowait(assistant("A red pixel.", 9000))
        file.append_compaction_nowait(
            CompactionResult("Greeting and an image.", 12345, 300, 6), first_kept_entry_id=kept
        )
        file.append_custom_nowait("my-extension", {"count": 42})
        file.append_custom_message_nowait("my-extension", "Injected", details={"k": 1})
        file.append_label_nowait(first, "start")
        named = file.append_session_info_nowait("Image work")
        file.append_settings_change_nowait("retry.enabled", False)
        file.append_message_nowait(UserMessage("Abandoned", timestamp=10000))
        file.branch(named)
        file.append_branch_summary_nowait("Tried another question.")
        file.append_message_nowait(UserMessage("Back", timestamp=12000))
        file.append_message_nowait(assistant("Yes.", 13000))
    loaded = load_session(path)
    seen = pi(pi_package, tmp_path / "home", "read", path)
    assert seen["context"]["messages"] == ours(loaded)
    assert [m["role"] for m in seen["context"]["messages"]] == [
        "compactionSummary",
        "user",
        "assistant",
        "assistant",
        "custom",
        "branchSummary",
        "user",
        "assistant",
    ]
    assert seen["context"]["thinkingLevel"] == loaded.thinking_level == "medium"
    model = seen["context"]["model"]
    assert (model["provider"], model["modelId"]) == loaded.model == ("anthropic", "claude-x")
    assert seen["sessionName"] == loaded.session_name == "Image work"
    assert seen["leafId"] == loaded.leaf_id
    assert [e["id"] for e in seen["branch"]] == [e.id for e in loaded.branch()]
    assert seen["entries"] == [loaded.raw[e.id] for e in loaded.entries]
    context = session_context(loaded)
    assert runtime_context(loaded) == [m for m in context if m.role != "assistant" or m.text]


class LastTurnCompactor:
    """Keeps the last turn behind a ``CompactionSummaryMessage``, as pi's context has it."""

    async def compact(
        self, messages: Sequence[Message], *, model: Model, settings: CompactionSettings, ask: Any
    ) -> Compaction | None:
        turns = split_turns(messages)
        if len(turns) < 2:
            return None
        kept = turns[-1]
        result = CompactionResult("older turns", 1234, 100, len(messages) - len(kept))
        summary = CompactionSummaryMessage("older turns", 1234, timestamp=int(T0 * 1000))
        return Compaction(messages=(summary, *kept), result=result)


async def test_compaction_then_resume_is_the_same_in_pi(
    pi_package: Path, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """R-50, R-20: a live session compacts on overflow; pi rebuilds from the file the context
    we had live plus the overflow error (which R-20 keeps out of ours), and we rebuild it
    exactly."""
    path = tmp_path / "live.jsonl"
    script = [FauxReply(text="a1"), FauxReply(text="b1"), FauxReply(error=ERR_OVERFLOW)]
    script += [FauxReply(text="c2")]
    model = Model(id="m", provider="faux", context_window=200_000)
    history = SessionFile.create(path, cwd="/src/app", clock=lambda: T0)
    async with open_session(
        FauxProvider(script), model, compactor=LastTurnCompactor(), history=history
    ) as session:
        for text in ("a", "b", "c"):
            await session.prompt(text)
        live = [message_to_json(m) for m in session.messages]
    history.close()
    seen = await trio.to_thread.run_sync(pi, pi_package, tmp_path / "home", "read", path)
    loaded = load_session(path)
    assert seen["context"]["messages"] == ours(loaded)
    assert [m["role"] for m in live] == ["compactionSummary", "user", "assistant"]
    error = seen["context"]["messages"][2]
    assert (error["stopReason"], error["errorMessage"]) == ("error", ERR_OVERFLOW)
    assert seen["context"]["messages"][:2] + seen["context"]["messages"][3:] == live
    assert [message_to_json(m) for m in runtime_context(loaded)] == live


# -- (b) we read what pi writes ------------------------------------------------------------


def test_we_read_pis_file(pi_package: Path, tmp_path: Path) -> None:
    """pi writes every entry type and a branch: we read every entry as its own type, rebuild
    pi's context exactly, keep every entry object whole (also in a fork), and pi reads the
    entries we then append."""
    written = pi(pi_package, tmp_path / "home", "write", tmp_path / "sessions")
    path = Path(written["file"])
    loaded = load_session(path)
    assert loaded.warnings == ()
    kinds = {type(e) for e in loaded.entries}
    assert kinds == {
        MessageEntry,
        ModelChangeEntry,
        ThinkingLevelChangeEntry,
        CompactionEntry,
        CustomEntry,
        CustomMessageEntry,
        LabelEntry,
        SessionInfoEntry,
        BranchSummaryEntry,
    }
    assert ours(loaded) == written["context"]["messages"]
    assert loaded.thinking_level == written["context"]["thinkingLevel"] == "high"
    model = written["context"]["model"]
    assert loaded.model == (model["provider"], model["modelId"])
    assert loaded.session_name == written["sessionName"] == "Image work"
    assert loaded.leaf_id == written["leafId"]
    assert [e.id for e in loaded.branch()] == [e["id"] for e in written["branch"]]
    assert [loaded.raw[e.id] for e in loaded.entries] == written["entries"]
    compaction = next(e for e in loaded.entries if isinstance(e, CompactionEntry))
    assert (compaction.details, compaction.from_hook) == ({"readFiles": ["a.png"]}, False)
    # R-20 on top: the retried 503 leaves the runtime context, not the file.
    context = session_context(loaded)
    failed = [m for m in context if isinstance(m, AssistantMessage) and m.failed]
    assert len(failed) == 1
    assert runtime_context(loaded) == [m for m in context if m is not failed[0]]

    forked = fork_session(path, loaded.leaf_id)
    copied = [json.loads(line) for line in forked.read_text(encoding="utf-8").splitlines()[1:]]
    branch = [e for e in written["branch"] if e["type"] != "label"]
    label = next(e for e in written["branch"] if e["type"] == "label")
    # The entry after the label that leaves the path is linked to the label's parent (pi's
    # own createBranchedSession leaves that parentId pointing at the dropped label).
    relinked = [
        {**e, "parentId": label["parentId"]} if e["parentId"] == label["id"] else e for e in branch
    ]
    assert copied[: len(branch)] == relinked
    assert relinked != branch
    assert [e["type"] for e in copied[len(branch) :]] == ["label"]
    assert pi(pi_package, tmp_path / "home", "read", forked)["context"] == written["context"]

    with SessionFile.resume(path) as file:
        file.append_message_nowait(UserMessage("From trio-session", timestamp=20000))
        file.append_message_nowait(assistant("Appended.", 21000))
    again = pi(pi_package, tmp_path / "home", "read", path)
    assert again["context"]["messages"] == [
        *written["context"]["messages"],
        message_to_json(UserMessage("From trio-session", timestamp=20000)),
        message_to_json(assistant("Appended.", 21000)),
    ]
    assert ours(load_session(path)) == again["context"]["messages"]


# -- random trees: pi and we agree on every one ----------------------------------------------


def random_session(path: Path, seed: int) -> None:
    """A session file grown by random operations: messages (failures included), model and
    thinking changes, compactions keeping from a random entry of the branch (several per
    file), branches back to random entries with and without a summary, custom messages,
    labels, names and settings changes."""
    rng = random.Random(seed)
    clock = iter(range(10**6))
    with SessionFile.create(path, cwd="/src/app", clock=lambda: T0 + next(clock)) as file:
        ids: list[str] = []
        branch: list[str] = []  # entry ids from the root to the leaf
        for step in range(rng.randint(5, 40)):
            kind = rng.choice(
                ["user"] * 4
                + ["answer"] * 4
                + ["failure", "compaction", "branch", "summary", "custom", "label", "misc"]
            )
            if kind == "branch" and ids:
                target = rng.choice([*ids, None])
                file.branch(target)
                branch = [] if target is None else load_branch(file, target)
                continue
            if kind == "summary" and ids:
                target = rng.choice(ids)
                file.branch(target)
                branch = load_branch(file, target)
                entry = file.append_branch_summary_nowait(f"summary {step}")
            elif kind == "user":
                entry = file.append_message_nowait(UserMessage(f"u{step}", timestamp=step))
            elif kind == "answer":
                entry = file.append_message_nowait(assistant(f"a{step}", step))
            elif kind == "failure":
                failure = AssistantMessage(
                    stop_reason="error", error_message=ERR_503, timestamp=step
                )
                entry = file.append_message_nowait(failure)
            elif kind == "compaction":
                keep = rng.choice([*branch, None, "missing0"])
                result = CompactionResult(f"compacted {step}", 100 + step, 10, 1)
                entry = file.append_compaction_nowait(result, first_kept_entry_id=keep)
            elif kind == "custom":
                entry = file.append_custom_message_nowait("ext", f"c{step}", display=step % 2 == 0)
            elif kind == "label" and ids:
                entry = file.append_label_nowait(rng.choice(ids), rng.choice(["l", None]))
            else:
                misc = rng.randrange(5)
                if misc == 0:
                    entry = file.append_model_change_nowait("openai", f"m{step}")
                elif misc == 1:
                    entry = file.append_thinking_level_change_nowait(f"t{step}")
                elif misc == 2:
                    entry = file.append_session_info_nowait(f"name {step}")
                elif misc == 3:
                    entry = file.append_settings_change_nowait("retry.enabled", False)
                else:
                    entry = file.append_custom_nowait("ext", {"step": step})
            ids.append(entry)
            branch.append(entry)
        if not file.has_messages:  # a new file is written with its first message
            file.append_message_nowait(UserMessage("the first message", timestamp=10**6))
        file.flush_sync()


def load_branch(file: SessionFile, leaf: str) -> list[str]:
    """The ids from the root to ``leaf`` of what ``file`` has staged or written so far."""
    file.flush_sync()
    return [e.id for e in file.read_back().branch(leaf)]


def test_random_trees_agree_with_pi(pi_package: Path, tmp_path: Path) -> None:
    """On 60 random session trees (several compactions, branches, summaries, dangling
    firstKeptEntryIds), pi's buildSessionContext and getSessionName equal ours."""
    paths = [tmp_path / f"random-{seed}.jsonl" for seed in range(60)]
    for seed, path in enumerate(paths):
        random_session(path, seed)
    seen = pi(pi_package, tmp_path / "home", "read-many", *paths)
    for path, theirs in zip(paths, seen, strict=True):
        loaded = load_session(path)
        assert theirs["context"]["messages"] == ours(loaded), path.name
        assert theirs["context"]["thinkingLevel"] == loaded.thinking_level, path.name
        model = theirs["context"]["model"]
        expected = None if model is None else (model["provider"], model["modelId"])
        assert loaded.model == expected, path.name
        assert theirs["sessionName"] == loaded.session_name, path.name
        assert [e["id"] for e in theirs["branch"]] == [e.id for e in loaded.branch()], path.name
