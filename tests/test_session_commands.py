"""The session's model, thinking, stats, bash and export commands (pi 0.73.1's semantics)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_session import (
    AssistantMessage,
    FauxProvider,
    FauxReply,
    Model,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
    open_session,
)
from trio_session._agent.tools import Tool
from trio_session._core.messages import BashExecutionMessage, CompactionSummaryMessage
from trio_session._core.stats import context_usage, estimate_tokens
from trio_session._session.bash_run import BashRun, truncate_tail
from trio_session.providers._anthropic import AnthropicProvider, thinking_budget
from trio_session.providers._base import ModelCost, clamp_thinking_level
from trio_session.providers._openai import OpenAIProvider
from trio_session.store._entries import MessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry
from trio_session.store._history import load_session

from .http_server import ScriptedServer, event_stream, sse

PLAIN = Model(id="plain", provider="faux")
THINKER = Model(id="thinker", provider="faux", reasoning=True)
OTHER = Model(id="other", provider="faux")


# -- models ------------------------------------------------------------------------------


async def test_one_model_cannot_cycle() -> None:
    """Without ``models`` the session's model is the only one; cycling changes nothing."""
    async with open_session(FauxProvider([]), PLAIN) as session:
        assert session.available_models == (PLAIN,)
        assert await session.cycle_model() is None
        assert session.model is PLAIN


async def test_session_model_is_put_first_when_not_listed() -> None:
    """The session's model is always available, first if ``models`` leaves it out."""
    async with open_session(FauxProvider([]), PLAIN, models=[THINKER, OTHER]) as session:
        assert session.available_models == (PLAIN, THINKER, OTHER)
    async with open_session(FauxProvider([]), OTHER, models=[THINKER, OTHER]) as session:
        assert session.available_models == (THINKER, OTHER)


async def test_set_model_applies_to_the_next_request_and_is_recorded(tmp_path: Path) -> None:
    """set_model: the next request asks the new model, its answer names it, the file says so."""
    provider = FauxProvider([FauxReply(text="one"), FauxReply(text="two")])
    path = tmp_path / "s.jsonl"
    async with open_session(provider, PLAIN, models=[PLAIN, OTHER], history=path) as session:
        first = await session.prompt("a")
        await session.set_model(OTHER)
        assert session.model is OTHER
        second = await session.prompt("b")
    assert [r.model.id for r in provider.requests] == ["plain", "other"]
    assert (first.model, second.model) == ("plain", "other")
    changes = [e for e in load_session(path).entries if isinstance(e, ModelChangeEntry)]
    # the file opens with the model, as pi's; then the switch
    assert [(e.provider, e.model_id) for e in changes] == [("faux", "plain"), ("faux", "other")]


async def test_cycle_model_wraps_and_reclamps_thinking() -> None:
    """cycle_model goes round the list; a model that does not reason is at "off", and
    coming back to one that does restores the level asked for (as pi does)."""
    async with open_session(FauxProvider([]), PLAIN, models=[PLAIN, THINKER]) as session:
        assert session.thinking_level == "off"
        assert await session.cycle_model() is THINKER
        assert session.thinking_level == "medium"  # pi's default, now that it can think
        session.set_thinking_level("high")
        assert await session.cycle_model() is PLAIN
        assert session.thinking_level == "off"
        assert await session.cycle_model() is THINKER
        assert session.thinking_level == "high"


async def test_resume_restores_model_and_thinking_level(tmp_path: Path) -> None:
    """A resumed file's last model_change (if available) and thinking_level_change apply."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([FauxReply(text="hi")])
    async with open_session(provider, PLAIN, models=[PLAIN, THINKER], history=path) as s:
        await s.prompt("hello")  # a new file is written with its first message
        await s.set_model(THINKER)
        s.set_thinking_level("low")
    async with open_session(FauxProvider([]), PLAIN, models=[PLAIN, THINKER], history=path) as s:
        assert (s.model, s.thinking_level) == (THINKER, "low")


# -- thinking ----------------------------------------------------------------------------


def test_clamping_follows_pi() -> None:
    """clampThinkingLevel: no reasoning → "off"; "xhigh" (no map here) → "high"."""
    assert [clamp_thinking_level(PLAIN, level) for level in ("off", "low", "xhigh")] == [
        "off",
        "off",
        "off",
    ]
    assert clamp_thinking_level(THINKER, "xhigh") == "high"
    assert clamp_thinking_level(THINKER, "minimal") == "minimal"


async def test_thinking_levels_reach_the_request_and_the_file(tmp_path: Path) -> None:
    """Each request carries the level; every change is a thinking_level_change entry."""
    provider = FauxProvider([FauxReply(text="a"), FauxReply(text="b")])
    path = tmp_path / "s.jsonl"
    async with open_session(provider, THINKER, history=path) as session:
        assert session.thinking_level == "medium"
        await session.prompt("one")
        assert session.cycle_thinking_level() == "high"
        assert session.cycle_thinking_level() == "off"
        assert session.cycle_thinking_level() == "minimal"
        session.set_thinking_level("minimal")  # no change: no entry
        session.set_thinking_level("xhigh")
        assert session.thinking_level == "high"
        await session.prompt("two")
    assert [r.thinking_level for r in provider.requests] == ["medium", "high"]
    levels = [e for e in load_session(path).entries if isinstance(e, ThinkingLevelChangeEntry)]
    # the opening level (pi's default for a reasoning model), then each change
    assert [e.thinking_level for e in levels] == ["medium", "high", "off", "minimal", "high"]


async def test_thinking_level_errors_and_non_reasoning_models() -> None:
    """An unknown level is a ValueError naming it; a model that does not reason stays off."""
    async with open_session(FauxProvider([]), PLAIN, thinking_level="high") as session:
        assert session.thinking_level == "off"
        with pytest.raises(
            ValueError,
            match=r"^thinking level must be one of off, minimal, low, medium, high, xhigh, "
            r"not 'max'$",
        ):
            session.set_thinking_level("max")
        session.set_thinking_level("high")
        assert session.thinking_level == "off"
        assert session.cycle_thinking_level() is None
        assert session.available_thinking_levels == ("off",)


# -- stats -------------------------------------------------------------------------------


async def echo(arguments: Any) -> str:
    """A tool that answers with its argument."""
    return str(arguments.get("x"))


async def test_stats_in_pis_shape(tmp_path: Path) -> None:
    """get_session_stats: counts over the context, usage totals, cost, pi's context estimate."""
    priced = Model(
        id="m",
        provider="faux",
        context_window=1000,
        cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
    )
    script = [
        FauxReply(
            tool_calls=(ToolCall("c1", "echo", {"x": 1}),), usage=Usage(input=100, output=10)
        ),
        FauxReply(text="done", usage=Usage(input=120, output=20, cache_read=40, cache_write=8)),
    ]
    path = tmp_path / "s.jsonl"
    async with open_session(
        FauxProvider(script), priced, tools=[Tool("echo", echo)], history=path
    ) as session:
        await session.prompt("go")
        stats = session.stats().to_json()
        session_id = session.session_id
    cost = (100 * 3 + 10 * 15 + 120 * 3 + 20 * 15 + 40 * 0.3 + 8 * 3.75) / 1e6
    assert stats == {
        "sessionFile": str(path),
        "sessionId": session_id,
        "userMessages": 1,
        "assistantMessages": 2,
        "toolCalls": 1,
        "toolResults": 1,
        "totalMessages": 4,
        "tokens": {"input": 220, "output": 30, "cacheRead": 40, "cacheWrite": 8, "total": 298},
        "cost": pytest.approx(cost),
        # the last answer's usage (120 + 20 + 40 + 8) and nothing after it
        "contextUsage": {"tokens": 188, "contextWindow": 1000, "percent": 18.8},
    }


def test_context_estimate_after_usage_and_after_compaction() -> None:
    """Messages after the last usage are estimated at chars/4; after a compaction the
    tokens are unknown until an answer with usage comes back."""
    answer = AssistantMessage(content=(TextContent("x"),), usage=Usage(input=50, output=10))
    later = UserMessage("a" * 10)  # ceil(10 / 4) = 3
    usage = context_usage([answer, later], 200)
    assert usage is not None
    assert (usage.tokens, usage.percent) == (63, 31.5)
    summary = CompactionSummaryMessage(summary="s", timestamp=answer.timestamp + 1)
    unknown = context_usage([summary, later], 200)
    assert unknown is not None
    assert (unknown.tokens, unknown.percent) == (None, None)
    assert context_usage([summary, answer, later], 200) == unknown  # kept: older than it
    fresh = attrs.evolve(answer, timestamp=summary.timestamp + 1)
    known = context_usage([summary, later, fresh], 200)
    assert known is not None
    assert known.tokens == 60
    assert context_usage([later], 0) is None
    assert estimate_tokens(BashExecutionMessage(command="ls", output="abcdef")) == 2
    assert estimate_tokens(UserMessage("😀" * 2)) == 1  # UTF-16 units, as JavaScript counts


def test_a_lone_surrogate_is_counted_not_a_crash() -> None:
    """Tool arguments a model sent with a lone surrogate (JSON allows ``"\\ud800"``)
    count one UTF-16 unit, as JavaScript counts it, instead of failing to encode."""
    call = ToolCall("c", "read", {"a": "\ud800"})  # {"a":"?"}: 9 units, read: 4
    assert estimate_tokens(AssistantMessage(content=(call,))) == 4


async def test_last_assistant_text_follows_pi(autojump_clock: trio.testing.MockClock) -> None:
    """Trimmed text of the last answer; aborted-and-empty answers are skipped; blank is None."""
    script = [FauxReply(text="  first  "), FauxReply(hang=True)]
    async with open_session(FauxProvider(script), PLAIN) as session:
        assert session.last_assistant_text() is None
        await session.prompt("a")
        assert session.last_assistant_text() == "first"
        with trio.move_on_after(1):
            await session.prompt("b")  # cancelled: an aborted answer with no content
        assert session.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
        assert session.last_assistant_text() == "first"
    async with open_session(FauxProvider([FauxReply(text="   ")]), PLAIN) as session:
        await session.prompt("a")
        assert session.last_assistant_text() is None


# -- bash --------------------------------------------------------------------------------


async def test_bash_result_joins_the_context_without_an_event(tmp_path: Path) -> None:
    """bash: output and exit code come back; the message is in context and file, no event
    is emitted, and the next prompt sends it to the model as pi's user text."""
    provider = FauxProvider([FauxReply(text="ok")])
    path = tmp_path / "s.jsonl"
    events: list[Any] = []
    async with open_session(provider, PLAIN, history=path) as session:
        session.subscribe(events.append)
        result = await session.bash("printf 'a\\nb'; echo err >&2; exit 3")
        assert (result.output, result.exit_code, result.cancelled) == ("a\nberr\n", 3, False)
        assert events == []
        (message,) = session.messages
        assert isinstance(message, BashExecutionMessage)
        assert message.exit_code == 3
        await session.prompt("what happened?")
    sent = provider.requests[0].messages
    assert [m.text for m in sent] == [
        "Ran `printf 'a\\nb'; echo err >&2; exit 3`\n```\na\nberr\n\n```\n\n"
        "Command exited with code 3",
        "what happened?",
    ]
    roles = [e.message.role for e in load_session(path).entries if isinstance(e, MessageEntry)]
    assert roles == ["bashExecution", "user", "assistant"]


async def test_bash_excluded_from_context_is_not_sent() -> None:
    """exclude_from_context: kept in the conversation, never sent to the model."""
    provider = FauxProvider([FauxReply(text="ok")])
    async with open_session(provider, PLAIN) as session:
        await session.bash("echo secret", exclude_from_context=True)
        await session.prompt("hi")
        assert isinstance(session.messages[0], BashExecutionMessage)
    assert [m.role for m in provider.requests[0].messages] == ["user"]


async def test_bash_output_is_capped_like_pi(tmp_path: Path) -> None:
    """Past 2000 lines the tail is kept; the whole output is in a private temp file."""
    async with open_session(FauxProvider([]), PLAIN) as session:
        result = await session.bash("seq 1 3000")
    assert result.truncated
    assert result.exit_code == 0
    assert result.output.split("\n") == [str(n) for n in range(1002, 3001)] + [""]
    assert result.full_output_path is not None
    full = trio.Path(result.full_output_path)
    try:
        assert await full.read_text() == "".join(f"{n}\n" for n in range(1, 3001))
        assert stat.S_IMODE((await full.stat()).st_mode) == 0o600
    finally:
        await full.unlink()


def test_truncate_tail_by_bytes() -> None:
    """The byte cap keeps whole lines from the end, or the end of one huge last line."""
    assert truncate_tail("aaaa\nbbbb\ncccc", max_bytes=9) == ("bbbb\ncccc", True)
    assert truncate_tail("x\n" + "é" * 10, max_bytes=5) == ("éé", True)
    assert truncate_tail("short") == ("short", False)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


async def _wait_for_file(path: trio.Path) -> str:
    """Wait until the shell has written its line (a condition only polling can see)."""
    while not await path.exists() or not (await path.read_text()).endswith("\n"):  # noqa: ASYNC110
        await trio.sleep(0.01)
    return await path.read_text()


async def test_abort_bash_kills_the_process_group(tmp_path: Path) -> None:
    """abort_bash: the shell and its children are killed; cancelled, no exit code."""
    pids = trio.Path(tmp_path / "pids")
    command = f"sleep 60 & echo $$ $! > {pids}; wait"
    async with open_session(FauxProvider([]), PLAIN) as session:
        results = []
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await session.bash(command))

            nursery.start_soon(run)
            with trio.fail_after(30):
                shell, child = map(int, (await _wait_for_file(pids)).split())
            assert session.is_bash_running
            session.abort_bash()
        (result,) = results
        assert (result.cancelled, result.exit_code) == (True, None)
        assert not session.is_bash_running
        assert session.messages[-1] == BashExecutionMessage(  # recorded, as pi records it
            command=command, output="", cancelled=True, timestamp=session.messages[-1].timestamp
        )
    assert _gone(shell)
    with trio.fail_after(30):
        while not _gone(child):  # noqa: ASYNC110 - reparented to init, reaped when it will be
            await trio.sleep(0.01)


async def test_bash_while_a_prompt_runs_waits_for_the_prompt_to_end() -> None:
    """As pi's _pendingBashMessages: the result is added after the run, never inside it."""
    async with open_session(FauxProvider([FauxReply(hang=True)]), PLAIN) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "think")
            while not session.is_running:
                await trio.lowlevel.checkpoint()
            result = await session.bash("echo side")
            assert result.output == "side\n"
            assert [m.role for m in session.messages] == ["user"]
            await session.abort()
        assert [m.role for m in session.messages] == ["user", "assistant", "bashExecution"]


async def test_second_bash_is_refused_while_one_runs() -> None:
    """One bash at a time; the second gets a clear error."""
    from trio_session import SessionBusyError

    async with open_session(FauxProvider([]), PLAIN) as session, trio.open_nursery() as nursery:
        nursery.start_soon(session.bash, "sleep 60")
        while not session.is_bash_running:
            await trio.lowlevel.checkpoint()
        with pytest.raises(
            SessionBusyError,
            match=r"^a bash command is already running; wait for it or abort_bash\(\) first$",
        ):
            await session.bash("true")
        session.abort_bash()


async def test_bash_run_is_cancelled_by_its_caller_too() -> None:
    """The caller's own cancellation kills the shell and propagates (no result)."""
    run = BashRun("sleep 60")
    with trio.move_on_after(0.2) as scope:
        await run.run()
    assert scope.cancelled_caught


# -- export ------------------------------------------------------------------------------


async def test_export_html_escapes_and_is_self_contained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export_html: every text escaped, no outside resources; pi-like default name in cwd."""
    monkeypatch.chdir(tmp_path)
    hostile = '<script>alert("x")</script><img src="http://evil/">'
    script = [FauxReply(text=f"echo {hostile}")]
    async with open_session(FauxProvider(script), PLAIN, system_prompt="be <b>") as session:
        await session.prompt(hostile)
        path = await session.export_html()
        other = await session.export_html(tmp_path / "sub" / "x.html")
        session_id = session.session_id
    assert path == tmp_path / f"trio-session-{session_id}.html"
    assert other == tmp_path / "sub" / "x.html"
    page = await trio.Path(path).read_text()
    assert page == await trio.Path(other).read_text()
    for outside in ("<script", "<img", "<link", 'src="http', 'href="http', "@import"):
        assert outside not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "be &lt;b&gt;" in page
    assert page.startswith("<!DOCTYPE html>")


# -- providers ---------------------------------------------------------------------------


def done_chunk() -> list[str]:
    """A minimal successful Chat Completions stream."""
    choice = {"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}
    return [
        sse({"id": "c", "object": "chat.completion.chunk", "choices": [choice]}),
        "data: [DONE]\n\n",
    ]


@pytest.fixture
async def http(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


async def test_openai_sends_reasoning_effort_only_for_reasoning_models(
    http: ScriptedServer,
) -> None:
    """The session's level goes out as reasoning_effort; never for a model that can't reason."""
    http.script(event_stream(done_chunk()), event_stream(done_chunk()), event_stream(done_chunk()))
    base = f"{http.url}/v1"
    reasoner = Model(id="o-test", provider="openai", base_url=base, reasoning=True)
    plain = Model(id="gpt-test", provider="openai", base_url=base)
    async with (
        OpenAIProvider(base_url=base, api_key="sk-x", timeout=5.0) as provider,
        open_session(provider, reasoner, models=[reasoner, plain]) as session,
    ):
        session.set_thinking_level("high")
        await session.prompt("a")
        session.set_thinking_level("off")
        await session.prompt("b")
        await session.set_model(plain)
        await session.prompt("c")
    bodies = [r.json() for r in http.requests]
    assert [b.get("reasoning_effort") for b in bodies] == ["high", None, None]
    assert [b["model"] for b in bodies] == ["o-test", "o-test", "gpt-test"]


def anthropic_stream() -> list[str]:
    """A minimal successful Messages stream."""
    message = {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {}}
    return [
        sse({"type": "message_start", "message": message}, event="message_start"),
        sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, event="message_delta"),
        sse({"type": "message_stop"}, event="message_stop"),
    ]


async def test_anthropic_sends_pis_thinking_budget(http: ScriptedServer) -> None:
    """thinking {type: enabled, budget_tokens} with pi's budgets; max_tokens grows to fit."""
    http.script(*(event_stream(anthropic_stream()) for _ in range(3)))
    model = Model(id="claude-t", provider="anthropic", base_url=http.url, reasoning=True)
    async with (
        AnthropicProvider(base_url=http.url, api_key="k-x", timeout=5.0) as provider,
        open_session(provider, model) as session,
    ):
        await session.prompt("a")  # medium
        session.set_thinking_level("minimal")
        await session.prompt("b")
        session.set_thinking_level("off")
        await session.prompt("c")
    bodies = [r.json() for r in http.requests]
    assert [(b["max_tokens"], b.get("thinking")) for b in bodies] == [
        (16384, {"type": "enabled", "budget_tokens": 8192}),
        (8192 + 1024, {"type": "enabled", "budget_tokens": 1024}),
        (8192, None),
    ]


def test_thinking_budget_when_the_model_cap_leaves_no_room() -> None:
    """adjustMaxTokensForThinking: capped at the model's max, 1024 left for the answer."""
    assert thinking_budget(8192, 4096, "high") == (4096, 3072)
    assert thinking_budget(8192, 64000, "xhigh") == (8192 + 16384, 16384)
    assert thinking_budget(100, 1000, "minimal") == (1000, 1024)  # 0 → pi's 1024
