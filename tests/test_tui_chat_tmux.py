"""The chat as people use it: ``trio-session chat`` on a scripted model, in tmux."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import wcwidth

from trio_session import UserMessage, load_session
from trio_session.store._entries import MessageEntry

from .tmux_support import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

Start = Callable[..., Tmux]


class Chat:
    """Where one test's chats keep their files: a home of their own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.work = root / "work"
        for directory in (self.home, self.work):
            directory.mkdir(exist_ok=True)
        self.started: list[Tmux] = []
        self.runs = 0

    def start(
        self,
        script: Sequence[dict[str, Any]],
        *args: str,
        width: int = 100,
        height: int = 30,
        shell: str = "",
    ) -> Tmux:
        """``trio-session chat --faux SCRIPT`` in a fresh terminal; stty saved around it."""
        self.runs += 1
        n = self.runs
        script_file = self.root / f"script{n}.json"
        script_file.write_text(json.dumps(list(script)))
        env = {
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.home / "data"),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "TERM": "xterm-256color",
        }
        program = shlex.join(
            [
                "env",
                *(f"{k}={v}" for k, v in env.items()),
                sys.executable,
                "-m",
                "trio_session",
                "chat",
                "--faux",
                str(script_file),
                *args,
            ]
        )
        before, after, done = (self.root / f"{name}{n}" for name in ("before", "after", "done"))
        command = (
            f"cd {shlex.quote(str(self.work))}; stty -g > {before}; ({shell}{program}); "
            f"echo EXIT=$? > {done}; stty -g > {after}; sleep 600"
        )
        tmux = Tmux(command, width=width, height=height)
        self.started.append(tmux)
        return tmux

    def exited(self, run: int) -> bool:
        """Whether run ``run`` has exited and saved its stty state after."""
        after = self.root / f"after{run}"
        return after.exists() and after.stat().st_size > 0

    def stty(self, run: int) -> tuple[str, str]:
        """``stty -g`` before and after run ``run``."""
        return (
            (self.root / f"before{run}").read_text(),
            (self.root / f"after{run}").read_text(),
        )

    def status(self, run: int) -> str:
        """What the shell saw run ``run`` exit with."""
        return (self.root / f"done{run}").read_text().strip()

    def session_files(self) -> list[Path]:
        """The session files the chats wrote."""
        found = (self.home / "data").rglob("*.jsonl")
        return sorted(p for p in found if p.name != "chat-history.jsonl")

    def user_messages(self, path: Path) -> list[str]:
        """The user messages saved in one session file."""
        return [
            e.message.text
            for e in load_session(path).entries
            if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
        ]


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Chat]:
    runner = Chat(tmp_path)
    yield runner
    for tmux in runner.started:
        tmux.kill()


def reply(text: str, *, chunks: Sequence[str] | None = None, delay: float = 0.0) -> dict[str, Any]:
    """A scripted reply, streamed in ``chunks`` (``delay`` seconds apart) when given."""
    out: dict[str, Any] = {"text": text}
    if chunks is not None:
        assert "".join(chunks) == text
        out["chunks"] = list(chunks)
        out["chunkDelay"] = delay
    return out


def no_row_wider_than(tmux: Tmux, width: int, *, history: bool = True) -> list[str]:
    """Every row (tmux's wrapping undone) fits ``width`` cells; the rows are returned."""
    rows = tmux.rows(history=history)
    wide = [row for row in rows if wcwidth.width(row) > width]
    assert not wide, f"rows wider than {width}:\n" + "\n".join(wide)
    return rows


def ready(tmux: Tmux) -> None:
    """Wait for the chat's hint line: it reads keys now."""
    tmux.wait_text("enter: send")


def test_a_bracketed_paste_of_three_lines_is_one_message(chat: Chat) -> None:
    """A 3-line paste lands in the editor whole and goes out as one message on Enter."""
    tmux = chat.start([reply("got all three")])
    ready(tmux)
    tmux.paste("first line\nsecond line\nthird line")
    tmux.wait_text("  third line")
    assert "you:" not in tmux.screen()  # nothing was sent by the paste's newlines
    tmux.keys("Enter")
    screen = tmux.wait_text("got all three")
    assert screen.count("you:") == 1
    assert "you: first line\n     second line\n     third line" in screen
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))
    [path] = chat.session_files()
    assert chat.user_messages(path) == ["first line\nsecond line\nthird line"]


def test_sessions_left_before_their_first_prompt_leave_no_file(chat: Chat) -> None:
    """The file a chat names at its start is written with its first prompt: quitting at
    once leaves no file, nor does a ``/new`` session left empty, while the one that was
    talked in is kept (pi writes no file until there is a message)."""
    tmux = chat.start([reply("Hello")])
    ready(tmux)
    assert chat.session_files() == []  # named on screen, not yet written
    tmux.type("hi")
    tmux.keys("Enter")
    tmux.wait_for(lambda screen: "Hello" in screen and "enter: send" in screen)
    [first] = chat.session_files()
    tmux.keys("/new", "Enter")
    tmux.wait_for(lambda screen: "Hello" not in screen and "enter: send" in screen)
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))
    assert chat.status(1) == "EXIT=0"
    assert chat.session_files() == [first]
    assert chat.user_messages(first) == ["hi"]

    tmux = chat.start([reply("never asked")])
    ready(tmux)
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(2))
    assert chat.status(2) == "EXIT=0"
    assert chat.session_files() == [first]


def test_resume_without_a_file_opens_the_picker(chat: Chat) -> None:
    """``chat --resume`` with no FILE opens the picker of this directory's sessions, as
    pi's does; Enter opens the one chosen, and the new session under the picker, never
    talked in, leaves no file."""
    tmux = chat.start([reply("Hello")])
    ready(tmux)
    tmux.type("remember the word kestrel")
    tmux.keys("Enter")
    tmux.wait_for(lambda screen: "Hello" in screen and "enter: send" in screen)
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))
    [first] = chat.session_files()

    tmux = chat.start([reply("It was kestrel")], "--resume")
    screen = tmux.wait_text("resume a session")
    assert "remember the word kestrel" in screen  # the session's first message, as its label
    tmux.keys("Enter")
    tmux.wait_text("you: remember the word kestrel")  # its conversation, shown
    tmux.type("which word?")
    tmux.keys("Enter")
    tmux.wait_text("It was kestrel")
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(2))
    assert chat.status(2) == "EXIT=0"
    assert chat.session_files() == [first]
    assert chat.user_messages(first) == ["remember the word kestrel", "which word?"]


def test_a_streamed_multi_paragraph_reply_has_one_label(chat: Chat) -> None:
    """Chunks that end in newlines do not start new labels: one ``assistant:`` per reply."""
    chunks = [
        "First paragraph, line one.\n",
        "\n",
        "Second paragraph.\n",
        "\n",
        "- a list item\n",
        "- another item\n",
        "\n",
        "Last words.",
    ]
    tmux = chat.start([reply("".join(chunks), chunks=chunks, delay=0.05)])
    ready(tmux)
    tmux.type("tell me")
    tmux.keys("Enter")
    screen = tmux.wait_text("Last words.")
    assert screen.count("assistant:") == 1
    assert "• a list item" in screen
    assert "• another item" in screen
    assert screen.index("First paragraph") < screen.index("Second paragraph")


@pytest.mark.parametrize("width", [40, 60])
def test_cjk_and_emoji_fit_the_screen(chat: Chat, width: int) -> None:
    """CJK and emoji, typed and replied, wrap by display width: no row wider than the screen."""
    answer = "日本語の文章はとても長くなることがあります。😀 絵文字も幅が二つです。" * 3
    tmux = chat.start([reply(answer)], width=width, height=30)
    ready(tmux)
    typed = "漢字とかなを混ぜた長い質問です。🎉 これで折り返されますか？"
    tmux.type(typed)
    tmux.wait_text("🎉")
    no_row_wider_than(tmux, width)
    tmux.keys("Enter")
    tmux.wait_text("you: 漢字")
    tmux.wait_for(lambda s: s.count("絵文字も") == 3)
    rows = no_row_wider_than(tmux, width)
    text = "".join("".join(rows).split())
    assert "".join(answer.split()) in text
    assert "".join(typed.split()) in text


def test_resize_mid_stream_redraws_to_the_new_width(chat: Chat) -> None:
    """A resize while a reply streams: everything is redrawn at the new width, one label."""
    words = [f"word{i:02d} " for i in range(60)]
    text = "".join(words) + "END"
    tmux = chat.start([reply(text, chunks=[*words, "END"], delay=0.05)], width=80, height=24)
    ready(tmux)
    tmux.type("go")
    tmux.keys("Enter")
    tmux.wait_text("word05")
    tmux.resize(50, 24)
    tmux.wait_text("END")
    rows = no_row_wider_than(tmux, 50)
    screen = "\n".join(rows)
    assert screen.count("assistant:") == 1
    assert all(f"word{i:02d}" in screen for i in range(60))


def test_history_recall_with_up_and_across_chats(chat: Chat) -> None:
    """Up recalls what was sent; the history is kept for the next chat of the same user."""
    tmux = chat.start([reply("one"), reply("two")])
    ready(tmux)
    tmux.type("my first question")
    tmux.keys("Enter")
    tmux.wait_text("one")
    tmux.keys("Up")
    tmux.wait_for(lambda s: "> my first question" in s)
    tmux.keys("Enter")
    screen = tmux.wait_text("two")
    assert screen.count("you: my first question") == 2
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))

    again = chat.start([reply("three")])
    ready(again)
    again.keys("Up")
    again.wait_for(lambda s: "> /quit" in s)
    again.keys("Up")
    again.wait_for(lambda s: "> my first question" in s)


def test_a_long_input_at_40_columns_stays_visible_and_editable(chat: Chat) -> None:
    """A 150-character input wraps in the editor; it can be edited in the middle and sent."""
    tmux = chat.start([reply("noted")], width=40, height=24)
    ready(tmux)
    words = " ".join(f"w{i:02d}" for i in range(38))  # 151 characters
    tmux.type(words)
    tmux.wait_text("w37")
    rows = no_row_wider_than(tmux, 40, history=False)
    shown = " ".join(" ".join(rows).split())
    assert words in shown  # every word on screen, in order
    tmux.keys("Home")  # the start of the (logical) line
    tmux.type("START ")
    tmux.wait_text("> START w00")
    tmux.keys("End")
    tmux.type(" END")
    tmux.wait_text("w37 END")
    tmux.keys("Enter")
    tmux.wait_text("noted")
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))
    [path] = chat.session_files()
    assert chat.user_messages(path) == [f"START {words} END"]


def test_a_markdown_code_block_is_rendered(chat: Chat) -> None:
    """Markdown in a reply: the code block's lines keep their indentation, no fences."""
    answer = "Here is **the** code:\n\n```python\ndef double(x):\n    return 2 * x\n```\n\nDone."
    tmux = chat.start([reply(answer)])
    ready(tmux)
    tmux.type("code please")
    tmux.keys("Enter")
    screen = tmux.wait_text("Done.")
    assert "def double(x):" in screen
    assert "    return 2 * x" in screen
    assert "```" not in screen
    assert "**" not in screen
    assert "Here is the code:" in screen


@pytest.mark.parametrize("how", ["--continue", "--resume"])
def test_resume_shows_the_earlier_turns(chat: Chat, how: str) -> None:
    """``--continue`` / ``--resume FILE`` open a session with its conversation on screen."""
    tmux = chat.start([reply("The capital of France is Paris.")])
    ready(tmux)
    tmux.type("capital of France?")
    tmux.keys("Enter")
    tmux.wait_text("Paris.")
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))

    [path] = chat.session_files()
    args = [how] if how == "--continue" else [how, str(path)]
    again = chat.start([reply("Lyon is second.")], *args)
    screen = again.wait_text("The capital of France is Paris.")
    assert "you: capital of France?" in screen
    ready(again)
    again.type("and the second city?")
    again.keys("Enter")
    again.wait_text("Lyon is second.")


def test_resume_command_picks_an_earlier_session(chat: Chat) -> None:
    """``/resume`` lists this directory's sessions by first message; Enter opens one."""
    tmux = chat.start([reply("apples are red")])
    ready(tmux)
    tmux.type("about apples")
    tmux.keys("Enter")
    tmux.wait_text("apples are red")
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))

    again = chat.start([reply("pears are green")])
    ready(again)
    again.type("about pears")
    again.keys("Enter")
    again.wait_text("pears are green")
    again.type("/resume")
    again.keys("Enter")
    screen = again.wait_text("resume a session")
    assert "about apples" in screen
    assert "about pears" not in screen.split("resume a session")[1]
    again.keys("Enter")
    screen = again.wait_text("apples are red")
    assert "pears are green" not in screen


def test_quit_erases_the_live_region_and_restores_the_terminal(chat: Chat) -> None:
    """``/quit`` exits 0, leaves no status line or footer behind, and ``stty -g`` is as before."""
    tmux = chat.start([])
    ready(tmux)
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))
    assert chat.status(1) == "EXIT=0"
    before, after = chat.stty(1)
    assert before == after
    screen = tmux.screen()
    assert "enter: send" not in screen
    assert "─" * 20 not in screen


def test_ctrl_c_while_streaming_aborts_then_exits(chat: Chat) -> None:
    """Ctrl+C aborts a streaming reply; a second Ctrl+C exits 0 with the terminal restored."""
    words = [f"slow{i} " for i in range(200)]
    tmux = chat.start([reply("".join(words), chunks=words, delay=0.2)])
    ready(tmux)
    tmux.type("go slowly")
    tmux.keys("Enter")
    tmux.wait_text("slow2")
    tmux.keys("C-c")
    tmux.wait_text("press Ctrl+C again to exit")
    tmux.wait_text("✗ aborted")
    tmux.keys("C-c")
    tmux.wait_for(lambda _: chat.exited(1))
    assert chat.status(1) == "EXIT=0"
    before, after = chat.stty(1)
    assert before == after


def test_typing_while_the_agent_works_queues_a_steer(chat: Chat) -> None:
    """Enter while a reply streams queues the message as a steer; the footer counts it."""
    words = [f"busy{i} " for i in range(40)]
    tmux = chat.start([reply("".join(words), chunks=words, delay=0.1), reply("steered answer")])
    ready(tmux)
    tmux.type("start")
    tmux.keys("Enter")
    tmux.wait_text("busy2")
    tmux.type("change of plan")
    tmux.keys("Enter")
    screen = tmux.wait_text("⋯ steer: change of plan")
    assert "⋯ 1 queued" in screen
    screen = tmux.wait_text("steered answer")
    assert "you: change of plan" in screen


def test_a_session_file_that_cannot_grow_stops_the_chat_with_a_clear_message(
    chat: Chat,
) -> None:
    """Under ``ulimit -f`` the second prompt cannot be saved: the chat says why, exits 1,
    restores the terminal, and the file holds the first exchange intact."""
    tmux = chat.start([reply("Hello"), reply("never asked")], shell="ulimit -f 4; ")
    ready(tmux)
    tmux.type("hi")
    tmux.keys("Enter")
    tmux.wait_text("Hello")
    tmux.paste("x" * 3000)
    tmux.keys("Enter")
    tmux.wait_for(lambda _: chat.exited(1))
    assert chat.status(1) == "EXIT=1"
    screen = tmux.screen()
    assert "cannot write session file" in screen
    assert "File too large; stopping" in screen
    assert "Traceback" not in screen
    before, after = chat.stty(1)
    assert before == after
    [path] = chat.session_files()
    assert chat.user_messages(path) == ["hi"]


def test_resize_mid_stream_leaves_no_stale_row_in_the_scrollback(chat: Chat) -> None:
    """Resizes (narrower, shorter, wider) while a long reply streams: the scrollback
    holds the conversation once -- one label, each word once, one status line, one
    footer -- no frame drawn before a resize is left behind."""
    words = [f"w{i:03d} " for i in range(240)]
    text = "".join(words) + "END"
    tmux = chat.start([reply(text, chunks=[*words, "END"], delay=0.02)], width=80, height=24)
    ready(tmux)
    tmux.type("go")
    tmux.keys("Enter")
    tmux.wait_text("w010")
    for width, height in ((60, 18), (100, 30), (50, 12), (70, 24)):
        before = tmux.screen()
        tmux.resize(width, height)
        tmux.wait_for(before.__ne__)  # redrawn, and streaming on
    # the last word shown is not the turn's end: the hint line comes back once it is over
    tmux.wait_for(lambda screen: "END" in screen and "enter: send" in screen)
    rows = no_row_wider_than(tmux, 70)
    text_rows = [row for row in rows if row.strip()]
    shown_rows = "\n".join(text_rows)
    assert sum(row == "assistant:" for row in text_rows) == 1, shown_rows
    assert sum(row.startswith("you: go") for row in text_rows) == 1, shown_rows
    assert sum(row.startswith("enter: send") for row in text_rows) == 1, shown_rows
    assert sum(row.startswith("─") for row in text_rows) == 2, shown_rows
    shown = " ".join(text_rows).split()
    assert all(shown.count(word.strip()) == 1 for word in words)


def test_a_numbered_list_of_twelve_streams_aligned(chat: Chat) -> None:
    """A 12-item numbered list streamed item by item: at every frame checked, and at the
    end, every item's text starts in one column (items 1-9 are not a column narrower)."""
    items = [f"{n}. entry {n} of the list\n" for n in range(1, 13)]
    tmux = chat.start([reply("".join(items), chunks=items, delay=0.15)], width=60, height=30)
    ready(tmux)
    tmux.type("list")
    tmux.keys("Enter")

    def columns(screen: str) -> set[int]:
        return {row.index("entry") for row in screen.split("\n") if "entry" in row}

    tmux.wait_text("entry 10 ")
    assert len(columns(tmux.screen())) == 1, tmux.screen()
    screen = tmux.wait_text("entry 12 ")
    assert len(columns(screen)) == 1, screen
    assert "  1 entry 1 of the list" in screen  # the column of "10", "11", "12"


def test_a_tool_call_shows_its_result(chat: Chat) -> None:
    """A tool call is followed by its result; here the chat has no such tool, so the
    result is the error, shown as the tool's failure."""
    script = [
        {"toolCalls": [{"id": "c1", "name": "fetch", "arguments": {"url": "notes.txt"}}]},
        reply("I could not fetch it."),
    ]
    tmux = chat.start(script)
    ready(tmux)
    tmux.type("fetch notes.txt")
    tmux.keys("Enter")
    screen = tmux.wait_text("I could not fetch it.")
    assert '→ fetch("url": "notes.txt")' in screen
    assert "  ✗ fetch failed\n    unknown tool 'fetch'" in screen
    assert screen.index("✗ fetch failed") < screen.index("I could not fetch it.")


def test_slash_completion_lists_and_completes(chat: Chat) -> None:
    """``/`` lists the commands above the editor; ``mo`` and Tab make it ``/model``;
    Enter runs it (the model picker)."""
    tmux = chat.start([])
    ready(tmux)
    tmux.type("/")
    screen = tmux.wait_text("/compact")
    assert "  /resume" in screen
    assert "start a new session" in screen
    tmux.type("mo")
    tmux.wait_for(lambda s: "/resume" not in s)
    tmux.keys("Tab")
    tmux.wait_for(lambda s: "> /model" in s and "choose the model (/model" not in s)
    tmux.keys("Enter")
    tmux.wait_text("choose a model")


def _call(ident: str, name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted reply that calls one tool."""
    return {"toolCalls": [{"id": ident, "name": name, "arguments": arguments}]}


def test_a_coding_task_shows_its_tool_calls_and_results(chat: Chat) -> None:
    """Issue 42, acceptance 4: the model reads app.py, edits it and runs it; the chat
    shows each call and its result, and the file on disk is fixed."""
    (chat.work / "app.py").write_text('STATUS = 503\nprint("status", STATUS)\n')
    edit = [{"oldText": "STATUS = 503", "newText": "STATUS = 200"}]
    tmux = chat.start(
        [
            _call("c1", "read", path="app.py"),
            _call("c2", "edit", path="app.py", edits=edit),
            _call("c3", "bash", command="python3 app.py"),
            _call("c4", "edit", path="app.py", edits=[{"oldText": "absent", "newText": "x"}]),
            reply("Fixed: the status is 200."),
        ],
        height=50,
    )
    ready(tmux)
    tmux.type("fix app.py")
    tmux.keys("Enter")
    screen = tmux.wait_text("Fixed: the status is 200.")
    for shown in (
        '→ read("path": "app.py")',
        "← read",
        "STATUS = 503",
        "← edit",
        "Successfully replaced 1 block(s) in app.py.",
        '→ bash("command": "python3 app.py")',
        "← bash",
        "status 200",
        "✗ edit failed",
        "Could not find the exact text in app.py.",
    ):
        assert shown in screen, shown
    assert (chat.work / "app.py").read_text() == 'STATUS = 200\nprint("status", STATUS)\n'
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))


def test_a_running_bash_streams_its_output(chat: Chat) -> None:
    """While bash runs, the chat shows ``$ command``, the last five lines of its output
    under how many are hidden, and the time it has run; Ctrl+O shows them all; Esc
    ends it and its result goes to the transcript."""
    command = "printf 'line%s\\n' 1 2 3 4 5 6 7 8; sleep 300"
    tmux = chat.start([_call("c1", "bash", command=command), reply("never sent")], height=40)
    ready(tmux)
    tmux.type("run it")
    tmux.keys("Enter")
    screen = tmux.wait_text("line8")
    rows = screen.split("\n")
    at = rows.index("  $ " + command)
    assert rows[at + 1 : at + 7] == [
        "    … (3 earlier lines, ctrl+o to expand)",
        *(f"    line{n}" for n in range(4, 9)),
    ], screen
    assert rows[at + 7].startswith("    Elapsed "), screen
    assert "running bash… (esc to abort)" in screen
    tmux.keys("C-o")
    screen = tmux.wait_text("    line1")
    assert "earlier lines" not in screen
    tmux.keys("Escape")
    screen = tmux.wait_text("tool call aborted")
    assert "Elapsed" not in screen
    tmux.wait_text("enter: send")
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))


def test_esc_aborts_a_running_bash_and_its_process_group(chat: Chat) -> None:
    """While bash runs, its output shows above the status line; Esc kills the command's
    process group, the result says it was aborted, and the chat takes keys again."""
    command = "echo building; echo $$ > pid; sleep 300"
    tmux = chat.start([_call("c1", "bash", command=command), reply("never sent")])
    ready(tmux)
    tmux.type("run it")
    tmux.keys("Enter")
    pid_file = chat.work / "pid"
    tmux.wait_for(lambda _: pid_file.exists() and pid_file.read_text().strip() != "")
    group = int(pid_file.read_text())
    tmux.wait_text("    building")
    tmux.keys("Escape")
    screen = tmux.wait_text("tool call aborted")
    assert "✗ bash failed" in screen
    tmux.wait_for(lambda _: not _living(group))
    tmux.wait_text("enter: send")
    tmux.keys("/quit", "Enter")
    tmux.wait_for(lambda _: chat.exited(1))


def _living(group: int) -> list[int]:
    """The processes of ``group`` that are not dead (a zombie is)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                alive.append(int(entry.name))
    return alive
