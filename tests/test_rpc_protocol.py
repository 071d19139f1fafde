"""The wire format, without I/O: command parsing, responses, JSON lines, line splitting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session.rpc import (
    Abort,
    AbortRetry,
    GetMessages,
    GetState,
    LineSplitter,
    NewSession,
    Overlong,
    Prompt,
    Rejected,
    Response,
    RetryNow,
    SetAutoCompaction,
    SetAutoRetry,
    encode_line,
    parse_command,
    response_to_json,
)
from trio_session.rpc._protocol import COMMANDS


@pytest.mark.parametrize(
    ("line", "command"),
    [
        (b'{"type": "prompt", "message": "Hi", "id": "req_1"}', Prompt("Hi", id="req_1")),
        (b'{"type": "abort"}', Abort()),
        (b'{"type": "abort_retry", "id": 7}', AbortRetry(id=7)),
        (b'{"type": "retry_now"}', RetryNow()),
        (b'{"type": "set_auto_retry", "enabled": false}', SetAutoRetry(enabled=False)),
        (b'{"type": "set_auto_compaction", "enabled": true}', SetAutoCompaction(enabled=True)),
        (b'{"type": "get_state"}', GetState()),
        (b'{"type": "get_messages"}', GetMessages()),
        (b'{"type": "new_session", "parentSession": "p"}', NewSession(parent_session="p")),
        (b'{"type": "new_session", "parentSession": null}', NewSession()),
        (b'{"type": "prompt", "message": "", "images": []}', Prompt("")),
        (b' {"type": "abort"} \r', Abort()),
    ],
)
def test_valid_commands(line: bytes, command: object) -> None:
    """R-39, R-42: each command of the protocol parses into its frozen command object."""
    assert parse_command(line) == command


def test_every_command_is_parsed() -> None:
    """The command table covers the issue's command list."""
    assert {
        "abort",
        "abort_retry",
        "get_messages",
        "get_state",
        "new_session",
        "prompt",
        "retry_now",
        "set_auto_compaction",
        "set_auto_retry",
    } <= set(COMMANDS)
    # -- session tree --
    assert {"switch_session", "fork", "clone", "get_fork_messages", "set_session_name"} <= set(
        COMMANDS
    )


def test_rejected_keeps_a_valid_id() -> None:
    """R-42: a bad command still carries its id, so the client can correlate the error."""
    assert parse_command(b'{"id": "x", "type": "prompt"}') == Rejected(
        "prompt", 'prompt needs "message" (a string)', "x"
    )


def test_responses_in_the_reference_shape() -> None:
    """R-39: {id?, type: "response", command, success, data?, error?}, in that order."""
    ok = response_to_json(Response.ok(GetState(id="a"), {"x": 1}))
    assert list(ok.items()) == [
        ("id", "a"),
        ("type", "response"),
        ("command", "get_state"),
        ("success", True),
        ("data", {"x": 1}),
    ]
    failed = response_to_json(Response.failed(Abort(), "nope"))
    assert failed == {"type": "response", "command": "abort", "success": False, "error": "nope"}
    rejected = response_to_json(Response.rejected(Rejected("parse", "bad")))
    assert rejected == {"type": "response", "command": "parse", "success": False, "error": "bad"}


def test_encode_line_is_compact_utf8() -> None:
    """A JSON line is compact UTF-8 with one newline, at the end."""
    assert encode_line({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}\n'.encode()


def test_encode_line_escapes_line_separators() -> None:
    """U+2028 and U+2029 are escaped, as the reference does, so lines stay lines."""
    line = encode_line({"text": "a\u2028b\u2029c\nd"})
    assert line == b'{"text":"a\\u2028b\\u2029c\\nd"}\n'
    assert json.loads(line) == {"text": "a\u2028b\u2029c\nd"}


def test_encode_line_survives_lone_surrogates() -> None:
    """A lone surrogate (from a \\ud800 escape in a prompt) gives an ASCII line, not an error."""
    line = encode_line({"text": "x\ud800é"})
    assert line == b'{"text":"x\\ud800\\u00e9"}\n'


lines_strategy = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20)


@settings(deadline=None)
@given(lines=lines_strategy, cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=10))
def test_splitter_finds_the_lines_however_the_bytes_arrive(
    lines: list[bytes], cuts: list[int]
) -> None:
    """Lines come out the same whatever the chunk boundaries (no cap)."""
    data = b"".join(line + b"\n" for line in lines)
    splitter = LineSplitter(None)
    out: list[bytes | Overlong] = []
    start = 0
    for cut in sorted(c for c in cuts if c <= len(data)):
        out += splitter.feed(data[start:cut])
        start = cut
    out += splitter.feed(data[start:])
    out += splitter.close()
    assert out == lines


def test_splitter_cap_is_inclusive() -> None:
    """A line of exactly the cap is a line; one byte more is Overlong."""
    splitter = LineSplitter(4)
    assert splitter.feed(b"abcd\nabcde\nok\n") == [b"abcd", Overlong(4), b"ok"]


def test_overlong_line_is_reported_once_and_skipped() -> None:
    """R-42: a long line is reported as soon as it passes the cap; the rest is dropped."""
    splitter = LineSplitter(10)
    assert splitter.feed(b"0123456789") == []
    assert splitter.feed(b"X") == [Overlong(10)]
    for _ in range(1000):
        assert splitter.feed(b"y" * 100) == []
        assert len(splitter._buffer) == 0  # nothing of it is kept
    assert splitter.feed(b"yyy\nnext\nla") == [b"next"]
    assert splitter.close() == [b"la"]


def test_overlong_last_line_is_not_a_line() -> None:
    """An overlong line cut off by end of input is not reported twice."""
    splitter = LineSplitter(3)
    assert splitter.feed(b"abcdef") == [Overlong(3)]
    assert splitter.close() == []


def test_overlong_rejection_text() -> None:
    """The error an overlong line gets."""
    assert Overlong(1048576).rejected == Rejected(
        "parse", "Failed to parse command: the line is longer than 1048576 bytes"
    )


def test_rpc_all_is_sorted_complete_and_documented() -> None:
    """trio_session.rpc's __all__ is sorted, complete, and every export has a docstring."""
    import inspect

    import trio_session.rpc as rpc

    names = rpc.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n[0].islower(), n))
    # The names are imported on first use (PEP 562): the table of where each lives is
    # complete, and once every name is used the package defines nothing else public.
    assert set(rpc._EXPORTS) == set(names)
    for name in names:
        getattr(rpc, name)
    defined = {
        name
        for name, value in vars(rpc).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and name not in {"annotations", "TYPE_CHECKING", "Any"}
    }
    assert defined == set(names)
    assert [
        name
        for name in names
        if (inspect.isclass(obj := getattr(rpc, name)) or inspect.isfunction(obj))
        and not inspect.getdoc(obj)
    ] == []
