"""The coding tools (issue 42): pi 1.6.0's read, bash, edit, write, grep, find and ls —
their schemas, their answers and errors in pi's words, and abort during bash."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    FauxProvider,
    FauxReply,
    Tool,
    ToolCall,
    ToolError,
    ToolResultMessage,
    coding_tools,
    open_session,
)
from trio_session._coding_tools import CODING_TOOL_NAMES, select_tools


def tools_in(cwd: Path) -> dict[str, Tool]:
    """Every coding tool, working in ``cwd``, by name."""
    return {t.name: t for t in coding_tools(cwd, CODING_TOOL_NAMES)}


async def answer(cwd: Path, name: str, **arguments: Any) -> str:
    """The result text of one call."""
    result = await tools_in(cwd)[name].execute(arguments)
    assert isinstance(result, str)
    return result


async def failure(cwd: Path, name: str, **arguments: Any) -> str:
    """The error text of one call that fails."""
    with pytest.raises(ToolError) as caught:
        await tools_in(cwd)[name].execute(arguments)
    return str(caught.value)


# -- the declarations -----------------------------------------------------------------------


def test_default_tools_are_pis_four_with_its_parameters(tmp_path: Path) -> None:
    """coding_tools(cwd) is read, bash, edit, write with pi 1.6.0's parameters and required ones."""
    declared = {
        t.name: (sorted(t.parameters["properties"]), t.parameters.get("required"))
        for t in coding_tools(tmp_path)
    }
    assert declared == {
        "read": (["limit", "offset", "path"], ["path"]),
        "bash": (["command", "timeout"], ["command"]),
        "edit": (["edits", "path"], ["path", "edits"]),
        "write": (["content", "path"], ["path", "content"]),
    }
    edit = next(t for t in coding_tools(tmp_path) if t.name == "edit")
    item = edit.parameters["properties"]["edits"]["items"]
    assert (sorted(item["properties"]), item["required"]) == (
        ["newText", "oldText"],
        ["oldText", "newText"],
    )


def test_opt_in_tools_have_pis_parameters(tmp_path: Path) -> None:
    """grep, find and ls, named, come with pi's parameters."""
    declared = {
        t.name: sorted(t.parameters["properties"])
        for t in coding_tools(tmp_path, ["grep", "find", "ls"])
    }
    assert declared == {
        "grep": ["context", "glob", "ignoreCase", "limit", "literal", "path", "pattern"],
        "find": ["limit", "path", "pattern"],
        "ls": ["limit", "path"],
    }


def test_an_unknown_tool_name_is_refused(tmp_path: Path) -> None:
    """A name that is not a coding tool is a ValueError naming the tools."""
    with pytest.raises(
        ValueError,
        match=r"^no coding tool is called 'cat' \(the tools: read, bash, edit, write, grep, "
        r"find, ls\)$",
    ):
        coding_tools(tmp_path, ["read", "cat"])


def test_selection_as_pi_reads_it() -> None:
    """Plain names replace the defaults; +name/-name change them; mixing is refused."""
    assert select_tools(["read", "grep"]) == ["read", "grep"]
    assert select_tools(["+grep", "-write"]) == ["read", "bash", "edit", "grep"]
    assert select_tools(["+read"]) == ["read", "bash", "edit", "write"]
    assert select_tools([]) == []
    with pytest.raises(ValueError, match=r"^plain tool names and \+name/-name entries cannot"):
        select_tools(["read", "+grep"])


# -- read ------------------------------------------------------------------------------------


async def test_read_returns_the_file_as_it_is(tmp_path: Path) -> None:
    """A small file comes back whole, without line numbers."""
    (tmp_path / "app.py").write_text("print('hi')\nx = 1\n")
    assert await answer(tmp_path, "read", path="app.py") == "print('hi')\nx = 1\n"


async def test_read_offset_and_limit_say_what_is_left(tmp_path: Path) -> None:
    """offset is 1-based; a limit that stops early says how many lines remain."""
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = await answer(tmp_path, "read", path="f.txt", offset=3, limit=2)
    assert text == "line 3\nline 4\n\n[7 more lines in file. Use offset=5 to continue.]"


async def test_read_a_long_file_stops_at_2000_lines(tmp_path: Path) -> None:
    """A file past 2000 lines shows the first 2000 and the offset to go on from."""
    (tmp_path / "big.txt").write_text("".join(f"{i}\n" for i in range(1, 2501)))
    text = await answer(tmp_path, "read", path="big.txt")
    body, note = text.split("\n\n")
    assert body.split("\n") == [str(i) for i in range(1, 2001)]
    assert note == "[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"


async def test_read_a_wide_file_stops_at_50_kb(tmp_path: Path) -> None:
    """Lines of 1000 bytes: 51 fit in 50 KB, and the note says the byte limit cut it."""
    (tmp_path / "wide.txt").write_text(("x" * 999 + "\n") * 100)
    text = await answer(tmp_path, "read", path="wide.txt")
    body, note = text.split("\n\n")
    assert len(body.split("\n")) == 51
    assert note == "[Showing lines 1-51 of 101 (50.0KB limit). Use offset=52 to continue.]"


async def test_read_a_first_line_past_50_kb_points_at_sed(tmp_path: Path) -> None:
    """One line over 50 KB is not shown: the answer says how to see it in bash."""
    (tmp_path / "min.js").write_text("y" * 60_000)
    text = await answer(tmp_path, "read", path="min.js")
    assert text == (
        "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' min.js | head -c 51200]"
    )


async def test_read_a_binary_file_is_text_with_replacement_characters(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 come back as U+FFFD, not as a failure."""
    (tmp_path / "blob.bin").write_bytes(b"\x00\xff\xfeAB\x80\n")
    assert await answer(tmp_path, "read", path="blob.bin") == "\x00\ufffd\ufffdAB\ufffd\n"


async def test_read_errors_are_pis(tmp_path: Path) -> None:
    """A missing file and an offset past the end fail with pi's texts."""
    (tmp_path / "f.txt").write_text("a\nb\n")
    assert await failure(tmp_path, "read", path="nope.txt") == (
        f"ENOENT: no such file or directory, access '{tmp_path / 'nope.txt'}'"
    )
    assert await failure(tmp_path, "read", path="f.txt", offset=9) == (
        "Offset 9 is beyond end of file (3 lines total)"
    )


async def test_read_a_path_outside_the_working_directory(tmp_path: Path) -> None:
    """As pi's, the tools are no sandbox: ../ and absolute paths reach outside the cwd."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("outside\n")
    assert await answer(work, "read", path="../secret.txt") == "outside\n"
    assert await answer(work, "read", path=str(tmp_path / "secret.txt")) == "outside\n"
    assert await answer(work, "read", path="@../secret.txt") == "outside\n"


async def test_bad_arguments_are_an_error_result(tmp_path: Path) -> None:
    """A missing or mistyped argument fails the call with every problem named."""
    assert await failure(tmp_path, "read", offset="2") == (
        'Validation failed for tool "read": "path" is required; "offset" must be a number, not'
        " '2'"
    )


# -- edit and write --------------------------------------------------------------------------


async def test_edit_replaces_unique_text(tmp_path: Path) -> None:
    """An exact, unique oldText is replaced; the answer counts the blocks."""
    (tmp_path / "app.py").write_text("a = 1\nb = 2\n")
    text = await answer(
        tmp_path,
        "edit",
        path="app.py",
        edits=[{"oldText": "a = 1", "newText": "a = 10"}, {"oldText": "b", "newText": "c"}],
    )
    assert text == "Successfully replaced 2 block(s) in app.py."
    assert (tmp_path / "app.py").read_text() == "a = 10\nc = 2\n"


async def test_edit_a_non_unique_old_text_changes_nothing(tmp_path: Path) -> None:
    """oldText found twice: pi's error, and the file as it was."""
    (tmp_path / "f.txt").write_text("x\nx\n")
    error = await failure(tmp_path, "edit", path="f.txt", edits=[{"oldText": "x", "newText": "y"}])
    assert error == (
        "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more"
        " context to make it unique."
    )
    assert (tmp_path / "f.txt").read_text() == "x\nx\n"


async def test_edit_a_missing_old_text_changes_nothing(tmp_path: Path) -> None:
    """oldText absent: pi's error (edits[i] named when there are several)."""
    (tmp_path / "f.txt").write_text("x\n")
    one = await failure(tmp_path, "edit", path="f.txt", edits=[{"oldText": "q", "newText": "y"}])
    assert one == (
        "Could not find the exact text in f.txt. The old text must match exactly including all"
        " whitespace and newlines."
    )
    two = await failure(
        tmp_path,
        "edit",
        path="f.txt",
        edits=[{"oldText": "x", "newText": "y"}, {"oldText": "q", "newText": "y"}],
    )
    assert two == (
        "Could not find edits[1] in f.txt. The oldText must match exactly including all"
        " whitespace and newlines."
    )
    assert (tmp_path / "f.txt").read_text() == "x\n"


async def test_edit_overlapping_empty_and_no_op_edits_fail(tmp_path: Path) -> None:
    """Overlapping edits, an empty oldText, and an edit that changes nothing are errors."""
    (tmp_path / "f.txt").write_text("abcdef\n")
    overlap = [{"oldText": "abc", "newText": "1"}, {"oldText": "cde", "newText": "2"}]
    assert await failure(tmp_path, "edit", path="f.txt", edits=overlap) == (
        "edits[0] and edits[1] overlap in f.txt. Merge them into one edit or target disjoint"
        " regions."
    )
    empty = [{"oldText": "", "newText": "1"}]
    assert await failure(tmp_path, "edit", path="f.txt", edits=empty) == (
        "oldText must not be empty in f.txt."
    )
    same = [{"oldText": "abc", "newText": "abc"}]
    assert await failure(tmp_path, "edit", path="f.txt", edits=same) == (
        "No changes made to f.txt. The replacement produced identical content. This might"
        " indicate an issue with special characters or the text not existing as expected."
    )
    assert await failure(tmp_path, "edit", path="f.txt", edits=[]) == (
        "Edit tool input is invalid. edits must contain at least one replacement."
    )


async def test_edit_keeps_crlf_and_the_byte_order_mark(tmp_path: Path) -> None:
    """A CRLF file with a BOM keeps both; the new text's newlines become CRLF."""
    (tmp_path / "w.txt").write_bytes("\ufeffone\r\ntwo\r\n".encode())
    await answer(
        tmp_path, "edit", path="w.txt", edits=[{"oldText": "one\ntwo", "newText": "1\n2\n3"}]
    )
    assert (tmp_path / "w.txt").read_bytes() == "\ufeff1\r\n2\r\n3\r\n".encode()


async def test_edit_matches_typographic_quotes_and_trailing_spaces(tmp_path: Path) -> None:
    """pi's looser match: curly quotes and trailing spaces in the file still match."""
    (tmp_path / "q.py").write_text("keep  \nsay(\u201chi\u201d)   \nkeep\n")
    await answer(
        tmp_path, "edit", path="q.py", edits=[{"oldText": 'say("hi")', "newText": 'say("yo")'}]
    )
    assert (tmp_path / "q.py").read_text() == 'keep  \nsay("yo")\nkeep\n'


async def test_edit_takes_pis_older_argument_shapes(tmp_path: Path) -> None:
    """oldText/newText at the top, or edits as a JSON string, are mended as pi mends them."""
    (tmp_path / "f.txt").write_text("a b\n")
    await answer(tmp_path, "edit", path="f.txt", oldText="a", newText="A")
    await answer(tmp_path, "edit", path="f.txt", edits='[{"oldText": "b", "newText": "B"}]')
    assert (tmp_path / "f.txt").read_text() == "A B\n"


async def test_edit_a_missing_file(tmp_path: Path) -> None:
    """A file that is not there: pi's error with the code."""
    error = await failure(tmp_path, "edit", path="no.py", edits=[{"oldText": "a", "newText": "b"}])
    assert error == "Could not edit file: no.py. Error code: ENOENT."


async def test_write_creates_parent_directories(tmp_path: Path) -> None:
    """write makes the directories on the way and replaces what was there."""
    text = await answer(tmp_path, "write", path="notes/deep/todo.txt", content="one\n")
    assert text == "Successfully wrote to notes/deep/todo.txt"
    await answer(tmp_path, "write", path="notes/deep/todo.txt", content="two\n")
    assert (tmp_path / "notes" / "deep" / "todo.txt").read_text() == "two\n"


# -- bash ------------------------------------------------------------------------------------


async def test_bash_runs_in_the_working_directory(tmp_path: Path) -> None:
    """The command runs in the cwd; stdout and stderr both come back."""
    assert await answer(tmp_path, "bash", command="pwd; echo oops >&2") == f"{tmp_path}\noops\n"
    assert await answer(tmp_path, "bash", command="true") == "(no output)"


async def test_bash_a_failing_command_is_an_error_result(tmp_path: Path) -> None:
    """A non-zero exit: the output, then pi's status line."""
    assert await failure(tmp_path, "bash", command="echo partial; exit 3") == (
        "partial\n\n\nCommand exited with code 3"
    )


async def test_bash_timeout_kills_the_command(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """timeout=5 ends a command that would run 300 s, at 5 s, with pi's message."""
    start = trio.current_time()
    assert await failure(tmp_path, "bash", command="exec sleep 300", timeout=5) == (
        "Command timed out after 5 seconds"
    )
    assert trio.current_time() - start == 5
    assert await failure(tmp_path, "bash", command="true", timeout=-1) == (
        "Invalid timeout: must be a finite number of seconds"
    )


async def test_bash_output_past_the_limit_keeps_the_tail(tmp_path: Path) -> None:
    """3000 lines: the last 2000 are shown, and the full output is in the named file."""
    text = await answer(tmp_path, "bash", command="seq 1 3000")
    body, note = text.split("\n\n")
    assert body.split("\n") == [str(i) for i in range(1001, 3001)]
    prefix = "[Showing lines 1001-3000 of 3000. Full output: "
    assert note.startswith(prefix)
    assert note.endswith("]")
    full = trio.Path(note[len(prefix) : -1])
    try:
        assert await full.read_text() == "".join(f"{i}\n" for i in range(1, 3001))
    finally:
        await full.unlink()


async def test_abort_during_bash_kills_its_process_group(tmp_path: Path) -> None:
    """Aborting the prompt while bash runs: the group is gone, prompt() returns, and the
    history ends with the aborted tool result."""
    command = "echo $$ > pid; sleep 300 & sleep 300; wait"
    provider = FauxProvider(
        [FauxReply(tool_calls=(ToolCall("c1", "bash", {"command": command}),)), FauxReply("x")]
    )
    pid_file = tmp_path / "pid"
    async with open_session(provider, tools=coding_tools(tmp_path)) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "run it")
            while not pid_file.exists() or not pid_file.read_text().strip():  # noqa: ASYNC110
                await trio.sleep(0.01)  # waiting for the shell to say who it is
            group = int(pid_file.read_text())
            while len(living(group)) < 3:  # noqa: ASYNC110
                await trio.sleep(0.01)  # waiting for the shell and its two sleeps
            await session.abort()
        with trio.fail_after(30):  # SIGKILL is delivered, not awaited: wait for it to land
            while living(group):  # noqa: ASYNC110 - no event says a process died
                await trio.sleep(0.01)
        result = session.history[-1]
        assert isinstance(result, ToolResultMessage)
        assert (result.tool_name, result.is_error, result.text) == (
            "bash",
            True,
            "tool call aborted",
        )
    assert len(provider.requests) == 1


def living(group: int) -> list[int]:
    """The processes of ``group`` that are not dead (a zombie waiting for its reaper is)."""
    alive = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                alive.append(int(entry))
    return alive


# -- grep, find, ls --------------------------------------------------------------------------


def _tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("import os\nTODO: fix\nprint(1)\n")
    (root / "src" / "b.txt").write_text("todo later\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("TODO: generated\n")
    (root / ".gitignore").write_text("build/\n")
    (root / ".hidden").write_text("TODO hidden\n")
    (root / "bin.dat").write_bytes(b"TODO\0\1\2")


async def test_grep_lines_context_and_gitignore(tmp_path: Path) -> None:
    """Matches as path:line: text, context as path-line- text; ignored and binary files skipped."""
    _tree(tmp_path)
    assert await answer(tmp_path, "grep", pattern="TODO") == (
        ".hidden:1: TODO hidden\nsrc/a.py:2: TODO: fix"
    )
    assert await answer(tmp_path, "grep", pattern="todo", ignoreCase=True, glob="*.txt") == (
        "src/b.txt:1: todo later"
    )
    assert await answer(tmp_path, "grep", pattern="TODO", path="src", context=1) == (
        "a.py-1- import os\na.py:2: TODO: fix\na.py-3- print(1)"
    )
    assert await answer(tmp_path, "grep", pattern="nothing here") == "No matches found"


async def test_grep_limit_and_long_lines(tmp_path: Path) -> None:
    """At most limit matches, and lines cut at 500 characters, each with pi's note."""
    (tmp_path / "f.txt").write_text("m\n" * 3 + "m" + "z" * 600 + "\n")
    text = await answer(tmp_path, "grep", pattern="m", limit=2)
    assert text == (
        "f.txt:1: m\nf.txt:2: m\n\n[2 matches limit reached. Use limit=4 for more, or refine"
        " pattern]"
    )
    long = await answer(tmp_path, "grep", pattern="z")
    assert long == (
        f"f.txt:4: m{'z' * 499}... [truncated]\n\n[Some lines truncated to 500 chars. Use read"
        " tool to see full lines]"
    )


async def test_find_by_name_and_by_path(tmp_path: Path) -> None:
    """A pattern without / matches names at any depth, with / the path; .gitignore holds."""
    _tree(tmp_path)
    assert await answer(tmp_path, "find", pattern="*.py") == "src/a.py"
    assert await answer(tmp_path, "find", pattern="src/**") == "src/a.py\nsrc/b.txt"
    assert await answer(tmp_path, "find", pattern="*.rs") == "No files found matching pattern"
    assert await failure(tmp_path, "find", pattern="*", path="gone") == (
        f"Path not found: {tmp_path / 'gone'}"
    )


async def test_gitignore_negations_as_git_reads_them(tmp_path: Path) -> None:
    """``!`` re-includes what an earlier line ignored, the last matching line deciding (a
    deeper .gitignore after a shallower one); nothing comes back from below an ignored
    directory; ``\\#`` and ``\\!`` are names, not a comment and a negation."""
    (tmp_path / ".gitignore").write_text("*.log\n!keep.log\nbuild/\n!build/x.log\n\\#tmp\n")
    for name in ("a.log", "keep.log", "#tmp", "sub/b.log", "sub/debug.log", "build/x.log"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n")
    (tmp_path / "sub" / ".gitignore").write_text("!debug.log\n")
    assert await answer(tmp_path, "find", pattern="*") == (
        ".gitignore\nkeep.log\nsub/\nsub/.gitignore\nsub/debug.log"
    )


async def test_ls_sorted_with_slashes(tmp_path: Path) -> None:
    """ls lists dotfiles too, case-insensitively sorted, directories with /."""
    _tree(tmp_path)
    (tmp_path / "README").write_text("")
    assert await answer(tmp_path, "ls") == ".gitignore\n.hidden\nbin.dat\nbuild/\nREADME\nsrc/"
    assert await answer(tmp_path, "ls", limit=2) == (
        ".gitignore\n.hidden\n\n[2 entries limit reached. Use limit=4 for more]"
    )
    assert await failure(tmp_path, "ls", path="README") == f"Not a directory: {tmp_path / 'README'}"


# -- in a session ----------------------------------------------------------------------------


async def test_open_session_declares_no_tool_unless_asked() -> None:
    """open_session adds no tools by itself: the request declares none."""
    provider = FauxProvider([FauxReply("hi")])
    async with open_session(provider) as session:
        await session.prompt("hello")
    assert provider.requests[0].tools == ()


async def test_a_scripted_task_reads_edits_writes_and_runs(tmp_path: Path) -> None:
    """read, edit, write, bash, a failing edit and a missing read, through a session: the
    files on disk and the (tool, isError) sequence the model gets back."""
    (tmp_path / "app.py").write_text('print("503")\n')
    calls: list[tuple[str, Mapping[str, Any]]] = [
        ("read", {"path": "app.py"}),
        ("edit", {"path": "app.py", "edits": [{"oldText": "503", "newText": "200"}]}),
        ("write", {"path": "notes/todo.txt", "content": "done\n"}),
        ("bash", {"command": "python3 app.py && cat notes/todo.txt"}),
        ("edit", {"path": "app.py", "edits": [{"oldText": "absent", "newText": "x"}]}),
        ("read", {"path": "missing.txt"}),
    ]
    script = [
        FauxReply(tool_calls=(ToolCall(f"c{i}", name, args),))
        for i, (name, args) in enumerate(calls)
    ]
    provider = FauxProvider([*script, FauxReply("fixed")])
    async with open_session(provider, tools=coding_tools(tmp_path)) as session:
        reply = await session.prompt("fix it")
        results = [m for m in session.history if isinstance(m, ToolResultMessage)]
    assert reply.text == "fixed"
    assert (tmp_path / "app.py").read_text() == 'print("200")\n'
    assert (tmp_path / "notes" / "todo.txt").read_text() == "done\n"
    assert [(r.tool_name, r.is_error) for r in results] == [
        ("read", False),
        ("edit", False),
        ("write", False),
        ("bash", False),
        ("edit", True),
        ("read", True),
    ]
    assert results[3].text == "200\ndone\n"
    assert len(provider.requests) == 7
    assert [t.name for t in provider.requests[0].tools] == ["read", "bash", "edit", "write"]


async def test_bash_reports_its_output_while_it_runs(tmp_path: Path) -> None:
    """tool_execution_update events carry the output so far, as pi's: an empty one at
    the start, then the output, the last one the whole of it; the end follows them."""
    command = "echo one; read _ < go; echo two"
    os.mkfifo(tmp_path / "go")
    provider = FauxProvider(
        [FauxReply(tool_calls=(ToolCall("c1", "bash", {"command": command}),)), FauxReply("ok")]
    )
    seen: list[tuple[str, str]] = []
    async with open_session(provider, tools=coding_tools(tmp_path)) as session:

        def note(event: Any) -> None:
            if event.type == "tool_execution_update":
                seen.append((event.type, event.partial_result.text))
            elif event.type == "tool_execution_end":
                seen.append((event.type, event.result.text))

        session.subscribe(note)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "run it")
            while ("tool_execution_update", "one\n") not in seen:  # noqa: ASYNC110
                await trio.sleep(0.01)  # waiting for the first line to be reported
            async with await trio.open_file(tmp_path / "go", "w") as fifo:
                await fifo.write("\n")
    assert seen[0] == ("tool_execution_update", "")
    assert seen[-2:] == [
        ("tool_execution_update", "one\ntwo\n"),
        ("tool_execution_end", "one\ntwo\n"),
    ]


async def test_bash_reports_output_the_throttle_held_back(tmp_path: Path) -> None:
    """Output that comes within 0.1 s of the last update is reported when that time is
    up, while the command still runs (as pi's timer does) — not only at its end."""
    command = "echo a; sleep 0.01; echo b; read _ < go; echo c"
    os.mkfifo(tmp_path / "go")
    provider = FauxProvider(
        [FauxReply(tool_calls=(ToolCall("c1", "bash", {"command": command}),)), FauxReply("ok")]
    )
    updates: list[str] = []
    async with open_session(provider, tools=coding_tools(tmp_path)) as session:
        session.subscribe(
            lambda event: (
                updates.append(event.partial_result.text)
                if event.type == "tool_execution_update"
                else None
            )
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "run it")
            with trio.fail_after(30):
                while "a\nb\n" not in updates:  # noqa: ASYNC110
                    await trio.sleep(0.01)  # waiting for the held-back line to be reported
            async with await trio.open_file(tmp_path / "go", "w") as fifo:
                await fifo.write("\n")
    assert updates[-1] == "a\nb\nc\n"
