"""The chat app without a real terminal: keys through a pipe, the screen in pyte."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio
import wcwidth

from trio_session import FauxProvider, FauxReply, Model, UserMessage, open_session
from trio_session._agent.tools import Tool
from trio_session._core.messages import ToolCall
from trio_session._pi.prompt_input import PromptInput
from trio_session._pi.resources import load_resources
from trio_session._session.facade import AgentSession
from trio_session.tui._app import ChatApp
from trio_session.tui._input_history import InputHistory
from trio_session.tui._render import Style
from trio_session.tui._terminal import KeyReader, Screen

from .vt import VirtualTerminal

MODEL = Model(id="faux-model", provider="faux", context_window=10_000)


class Harness:
    """A ChatApp wired to a pipe (keys) and a virtual terminal (screen)."""

    def __init__(
        self, width: int = 60, height: int = 20, prompt_input: PromptInput | None = None
    ) -> None:
        self.vt = VirtualTerminal(width, height)
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.app = ChatApp(
            Screen(self.vt, size=self.vt.size),
            KeyReader(self.read_fd),
            history=InputHistory(),
            style=Style(color=False),
            prompt_input=prompt_input or PromptInput(),
        )

    def send(self, data: str | bytes) -> None:
        """Bytes as the terminal would send them for keys typed or pasted."""
        os.write(self.write_fd, data.encode() if isinstance(data, str) else data)

    def screen(self) -> str:
        return "\n".join(self.vt.scrollback() + self.vt.rows)

    async def wait_for(self, condition: Callable[[str], bool]) -> str:
        """Wait until the screen (with its scrollback) satisfies ``condition``."""
        with trio.move_on_after(30):
            while not condition(self.screen()):
                await self.vt.changed.wait()
        screen = self.screen()
        if not condition(screen):
            pytest.fail(f"timed out; the screen was:\n{screen}")
        return screen

    def close(self) -> None:
        os.close(self.write_fd)  # the app reads end of input and leaves
        os.close(self.read_fd)


@asynccontextmanager
async def running(
    replies: list[FauxReply],
    *,
    width: int = 60,
    height: int = 20,
    prompt_input: PromptInput | None = None,
    tools: tuple[Tool, ...] = (),
) -> AsyncIterator[Harness]:
    harness = Harness(width, height, prompt_input)
    async with (
        open_session(FauxProvider(replies), MODEL, tools=tools) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(harness.app.run, session)
        try:
            await harness.wait_for(lambda s: "enter: send" in s)
            yield harness
        finally:
            nursery.cancel_scope.cancel()
    harness.close()


async def test_typed_text_is_sent_and_answered() -> None:
    """Typed keys and Enter send a message; the reply shows under one label."""
    async with running(
        [
            FauxReply(
                text="Hello there.\n\nSecond paragraph.",
                chunks=(
                    "Hello there.\n",
                    "\n",
                    "Second paragraph.",
                ),
            )
        ]
    ) as h:
        h.send("hi\r")
        screen = await h.wait_for(lambda s: "Second paragraph." in s)
        assert "you: hi" in screen
        assert screen.count("assistant:") == 1


async def test_a_template_call_is_expanded_before_it_is_sent(tmp_path: Path) -> None:
    """A line naming one of pi's prompt templates is sent expanded, as pi's TUI does."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "greet.md").write_text("Say hello to $1 from ${@:2}")
    prompts = PromptInput(resources=load_resources(tmp_path, cwd=tmp_path, home=tmp_path))
    async with running([FauxReply(text="Done.")], prompt_input=prompts) as h:
        h.send('/greet Bob "the team"\r')
        screen = await h.wait_for(lambda s: "Done." in s)
        assert "you: Say hello to Bob from the team" in screen


async def test_a_bracketed_paste_is_one_message() -> None:
    """A pasted block with newlines is one message; its lines are not sent one by one."""
    async with running([FauxReply(text="ok")]) as h:
        h.send("\x1b[200~one\rtwo\r\nthree\x1b[201~")
        await h.wait_for(lambda s: "  three" in s)
        assert "you:" not in h.screen()
        h.send("\r")
        screen = await h.wait_for(lambda s: "ok" in s.split("you:")[-1])
        assert "you: one\n     two\n     three" in screen
        first = h.app.session.messages[0]
        assert isinstance(first, UserMessage)
        assert first.text == "one\ntwo\nthree"


async def test_wide_text_never_exceeds_the_width() -> None:
    """CJK and emoji wrap by display width in the editor and in replies."""
    answer = "日本語の文章はとても長くなることがあります。😀" * 4
    async with running([FauxReply(text=answer)], width=40) as h:
        h.send("漢字とかなの長い質問です。🎉" * 3 + "\r")
        await h.wait_for(lambda s: s.count("😀") == 4)
        for row in h.vt.scrollback() + h.vt.rows:
            assert wcwidth.width(row) <= 40


async def test_a_resize_redraws_at_the_new_width() -> None:
    """After the terminal shrinks, the next frame redraws everything at the new width."""
    async with running([FauxReply(text="word " * 40 + "END")], width=60) as h:
        h.send("go\r")
        await h.wait_for(lambda s: "END" in s)
        h.vt.resize(30, 20)
        h.app.render()
        await h.wait_for(lambda s: all(len(r) <= 30 for r in h.vt.rows) and "END" in s)
        assert h.screen().count("assistant:") == 1


async def test_esc_during_the_loader_cancels_the_retry() -> None:
    """R-46/R-47 through the app: Esc while the loader shows ends the chain, once."""
    async with running([FauxReply(error="503 Service Unavailable")] * 5) as h:
        h.send("hi\r")
        await h.wait_for(lambda s: "(esc to cancel)" in s)
        h.send("\x1b")
        screen = await h.wait_for(lambda s: "Retry failed after 1 attempts" in s)
        await h.wait_for(lambda s: "(esc to cancel)" not in s)
        assert screen.count("Retry failed after 1 attempts: Retry cancelled") == 1


async def test_help_lists_keys_and_commands() -> None:
    """/help prints the key table and every command."""
    async with running([]) as h:
        h.send("/help\r")
        screen = await h.wait_for(lambda s: "/quit" in s)
        for command in ("/new", "/resume", "/model", "/compact", "/name", "/help"):
            assert command in screen
        assert "Shift+Enter" in screen


async def test_name_sets_the_session_name_in_the_footer() -> None:
    """/name names the session; the footer shows it."""
    async with running([]) as h:
        h.send("/name my work\r")
        await h.wait_for(lambda s: "• my work" in s)
        assert h.app.session.session_name == "my work"


async def test_new_and_resume_without_an_opener_say_so() -> None:
    """A chat with one session (the demo) explains that /new is not available."""
    async with running([]) as h:
        h.send("/new\r")
        await h.wait_for(lambda s: "/new is not available here" in s)


async def test_resume_shows_the_conversation_so_far(tmp_path: Path) -> None:
    """Opening a session file shows its messages before anything is typed."""
    path = tmp_path / "s.jsonl"
    async with open_session(FauxProvider([FauxReply(text="Paris.")]), MODEL, history=path) as s:
        await s.prompt("capital of France?")

    harness = Harness()

    def opener(file: Path | None):  # type: ignore[no-untyped-def]
        return open_session(FauxProvider([]), MODEL, history=file or tmp_path / "new.jsonl")

    harness.app.opener = opener
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: harness.app.run(resume=path))
        screen = await harness.wait_for(lambda s: "Paris." in s)
        assert "you: capital of France?" in screen
        nursery.cancel_scope.cancel()
    harness.close()


async def test_model_picker_switches_the_model() -> None:
    """/model opens a picker of the available models; Enter on one switches to it."""
    other = Model(id="faux-other", provider="faux", context_window=20_000)
    harness = Harness()
    async with (
        open_session(FauxProvider([]), MODEL, models=[MODEL, other]) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(harness.app.run, session)
        await harness.wait_for(lambda s: "enter: send" in s)
        harness.send("/model\r")
        await harness.wait_for(lambda s: "choose a model" in s)
        harness.send("other")  # filter
        await harness.wait_for(lambda s: "filter: other" in s)
        harness.send("\r")
        await harness.wait_for(lambda s: "model: faux/faux-other" in s)
        assert session.model.id == "faux-other"
        # the footer's second row ends with the model, its window is the new one's
        await harness.wait_for(
            lambda s: any(r.endswith("faux-other") and "/20k" in r for r in harness.vt.rows)
        )
        nursery.cancel_scope.cancel()
    harness.close()


async def test_compact_summarizes_the_conversation() -> None:
    """/compact runs a manual compaction; the summary's first line is shown."""
    replies = [FauxReply(text="an answer"), FauxReply(text="Summary: we said hello.")]
    async with running(replies) as h:
        h.send("hello\r")
        await h.wait_for(lambda s: "an answer" in s)
        h.send("/compact keep it short\r")
        screen = await h.wait_for(lambda s: "⇣ compacted:" in s)
        assert "Summary: we said hello." in screen


async def test_new_opens_a_fresh_session(tmp_path: Path) -> None:
    """/new closes this session and opens a new one: an empty conversation, a new file."""
    files: list[Path] = []

    def opener(file: Path | None):  # type: ignore[no-untyped-def]
        if file is None:
            file = tmp_path / f"new{len(files)}.jsonl"
        files.append(file)
        return open_session(FauxProvider([FauxReply(text="first reply")]), MODEL, history=file)

    harness = Harness()
    harness.app.opener = opener
    async with trio.open_nursery() as nursery:
        nursery.start_soon(harness.app.run)
        await harness.wait_for(lambda s: "enter: send" in s)
        harness.send("hello\r")
        await harness.wait_for(lambda s: "first reply" in s)
        harness.send("/new\r")
        await harness.wait_for(lambda s: "new1.jsonl" in s)
        assert "first reply" not in harness.screen()
        assert harness.app.session.messages == ()
        assert files == [tmp_path / "new0.jsonl", tmp_path / "new1.jsonl"]
        nursery.cancel_scope.cancel()
    harness.close()


async def test_resume_with_no_other_session_says_so(tmp_path: Path) -> None:
    """/resume in a directory with no other session shows the picker saying so."""
    harness = Harness()
    harness.app.sessions_dir = tmp_path / "sessions"

    def opener(file: Path | None):  # type: ignore[no-untyped-def]
        return open_session(FauxProvider([]), MODEL, history=file or tmp_path / "s.jsonl")

    harness.app.opener = opener
    async with trio.open_nursery() as nursery:
        nursery.start_soon(harness.app.run)
        await harness.wait_for(lambda s: "enter: send" in s)
        harness.send("/resume\r")
        await harness.wait_for(lambda s: "(no other session in" in s)
        harness.send("\x1b")
        await harness.wait_for(lambda s: "resume a session" not in s)
        nursery.cancel_scope.cancel()
    harness.close()


async def lines_tool(arguments: object) -> str:
    return "\n".join(f"line {n}" for n in range(1, 13))


async def failing_tool(arguments: object) -> str:
    raise FileNotFoundError("no such file: missing.txt")


async def test_a_tool_result_shows_collapsed_and_ctrl_o_expands_it() -> None:
    """A tool's result shows under its call: 5 lines and how many more; Ctrl+O shows all,
    a second Ctrl+O collapses again."""
    replies = [
        FauxReply(tool_calls=[ToolCall(id="c1", name="lines", arguments={})]),
        FauxReply(text="All read."),
    ]
    async with running(replies, height=40, tools=(Tool("lines", lines_tool),)) as h:
        h.send("read it\r")
        screen = await h.wait_for(lambda s: "All read." in s)
        assert "→ lines()" in screen
        assert "  ← lines\n    line 1\n    line 2\n" in screen
        assert "    line 5\n    … (7 more lines, ctrl+o to expand)" in screen
        assert "line 6" not in screen
        h.send("\x0f")
        screen = await h.wait_for(lambda s: "line 12" in s)
        assert "more lines" not in screen
        assert screen.index("line 12") < screen.index("All read.")
        h.send("\x0f")
        screen = await h.wait_for(lambda s: "line 12" not in s)
        assert "(7 more lines, ctrl+o to expand)" in screen


async def test_a_failed_tool_shows_its_error() -> None:
    """A tool that raises: its error shows under the call, marked as failed."""
    replies = [
        FauxReply(tool_calls=[ToolCall(id="c1", name="read", arguments={"path": "x"})]),
        FauxReply(text="It is missing."),
    ]
    async with running(replies, tools=(Tool("read", failing_tool),)) as h:
        h.send("read x\r")
        screen = await h.wait_for(lambda s: "It is missing." in s)
        assert '→ read("path": "x")' in screen
        assert "✗ read failed" in screen
        assert "no such file: missing.txt" in screen


async def test_resume_shows_custom_messages_and_names_the_sessions_model(
    tmp_path: Path,
) -> None:
    """--resume shows an extension's custom_message (as pi's TUI does) and a banner made
    from the session names the resumed session's model, as the footer does."""
    other = Model(id="faux-other", provider="faux", context_window=20_000)
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([FauxReply(text="Paris.")])
    async with open_session(provider, other, history=path) as session:
        await session.prompt("capital of France?")
        file = session.history_file
        assert file is not None
        file.append_custom_message_nowait("reminder", "check the sources")
        file.append_custom_message_nowait("hidden", "not for the screen", display=False)
        await file.flush()

    harness = Harness()

    def opener(file: Path | None):  # type: ignore[no-untyped-def]
        return open_session(FauxProvider([]), MODEL, history=file, models=[MODEL, other])

    harness.app.opener = opener

    def banner(session: AgentSession) -> str:
        model = session.model
        return f"chat · {model.provider} {model.id}"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: harness.app.run(resume=path, banner=banner))
        screen = await harness.wait_for(lambda s: "[reminder] check the sources" in s)
        assert "Paris." in screen
        assert "not for the screen" not in screen
        assert "chat · faux faux-other" in screen
        assert harness.app.session.model.id == "faux-other"
        nursery.cancel_scope.cancel()
    harness.close()


async def test_slash_lists_the_matching_commands_and_tab_completes() -> None:
    """Typing ``/`` lists the commands above the editor; ``/mo`` + Tab is ``/model ``."""
    async with running([]) as h:
        h.send("/")
        screen = await h.wait_for(lambda s: "/compact" in s and "/resume" in s)
        assert "start a new session" in screen
        h.send("mo")
        await h.wait_for(lambda s: "/resume" not in s)
        h.send("\t")
        await h.wait_for(lambda s: "> /model" in s and "choose the model" not in s)
        assert h.app.editor.text == "/model "


async def test_ctrl_g_edits_the_message_in_the_editor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl+G runs $VISUAL on the message (the terminal given back while it runs);
    what it saved is the editor's text, and a failing editor says so."""
    script = tmp_path / "editor"
    script.write_text('#!/bin/sh\nprintf "rewritten by the editor\\n" > "$1"\n')
    script.chmod(0o700)
    monkeypatch.setenv("VISUAL", str(script))
    suspended: list[str] = []

    @contextmanager
    def suspend() -> Iterator[None]:
        suspended.append("cooked")
        yield
        suspended.append("raw")

    async with running([]) as h:
        h.app.suspend = suspend
        h.send("draft\x07")
        await h.wait_for(lambda s: "> rewritten by the editor" in s)
        assert suspended == ["cooked", "raw"]
        monkeypatch.setenv("VISUAL", "false")
        h.send("\x07")
        await h.wait_for(lambda s: "✗ false exited with status 1; the message is unchanged" in s)
        assert h.app.editor.text == "rewritten by the editor"
