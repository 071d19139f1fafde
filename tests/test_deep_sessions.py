"""Long sessions are deep trees: nothing that walks one recurses (issue 39, F4).

``get_tree`` nests each entry's node in its parent's ``children``, so a linear session
of some hundreds of entries was a value deeper than ``json``'s encoder could walk: the
``rpc`` process died with a ``RecursionError``. The files here are written as JSONL
directly, so building even 100 000 entries takes little time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_session._core.json_deep as _json_deep
from trio_session import FauxProvider, Model, open_session
from trio_session._core.json_deep import dumps, loads
from trio_session.rpc import open_rpc_client
from trio_session.rpc._entries import entries_json, tree_json
from trio_session.rpc._wire import encode_line
from trio_session.store._history import load_session
from trio_session.store._loaded import runtime_context, session_context
from trio_session.store._session_file import fork_session

from .test_rpc_process import raw_process

PLAIN = Model(id="plain", provider="faux")
TIME = "2026-01-01T00:00:00.000Z"
USAGE = {
    "input": 1,
    "output": 1,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 2,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def _entry(entry_id: str, parent: str | None, index: int) -> str:
    """One message entry's line: a user message at even ``index``, an answer at odd."""
    if index % 2 == 0:
        message: dict[str, Any] = {"role": "user", "content": f"q{index}", "timestamp": index}
    else:
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": f"a{index}"}],
            "api": "faux",
            "provider": "faux",
            "model": "plain",
            "usage": USAGE,
            "stopReason": "stop",
            "timestamp": index,
        }
    entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": TIME}
    return json.dumps({**entry, "message": message}) + "\n"


def write_session(path: Path, linear: int, branch: int = 0, branch_at: int = 2) -> Path:
    """A session file: ``linear`` entries ``e0…`` in a line, then ``branch`` entries
    ``b0…`` in a line whose first answers ``e<branch_at - 1>`` (the file's leaf is the
    last one written)."""
    header = {"type": "session", "version": 3, "id": "deep", "timestamp": TIME, "cwd": "/"}
    lines = [json.dumps(header) + "\n"]
    lines += (_entry(f"e{i}", f"e{i - 1}" if i else None, i) for i in range(linear))
    parent = f"e{branch_at - 1}"
    lines += (_entry(f"b{i}", f"b{i - 1}" if i else parent, branch_at + i) for i in range(branch))
    path.write_text("".join(lines), encoding="utf-8")
    return path


def chain(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The nodes from ``node`` down its last children, without recursion."""
    while True:
        yield node
        if not node["children"]:
            return
        node = node["children"][-1]


def check_linear_tree(tree: dict[str, Any], count: int) -> None:
    """``tree`` is one root with ``count`` entries ``e0…`` in a line, the last the leaf."""
    (root,) = tree["tree"]
    ids = [node["entry"]["id"] for node in chain(root)]
    assert ids == [f"e{i}" for i in range(count)]
    assert tree["leafId"] == f"e{count - 1}"


def check_branched_tree(tree: dict[str, Any], linear: int, branch: int) -> None:
    """``tree`` holds ``e0…`` in a line and ``b0…`` below ``e1``, the last ``b`` the leaf."""
    (root,) = tree["tree"]
    second = root["children"][0]
    main, side = second["children"]
    assert [n["entry"]["id"] for n in chain(main)] == [f"e{i}" for i in range(2, linear)]
    assert [n["entry"]["id"] for n in chain(side)] == [f"b{i}" for i in range(branch)]
    assert tree["leafId"] == f"b{branch - 1}"


async def test_get_tree_of_a_100_000_entry_session_over_rpc(tmp_path: Path) -> None:
    """F4: a real ``rpc`` process answers ``get_tree`` of a 100 000-entry linear session
    (it died of a RecursionError at about 450); the answer is one line, the whole line."""
    count = 100_000
    path = write_session(tmp_path / "long.jsonl", count)
    script = tmp_path / "script.json"
    script.write_text("[]")
    async with raw_process(["--faux", str(script), "--session", str(path)]) as (process, raw):
        await raw.send({"id": 1, "type": "get_tree"})
        line = await raw.read_raw()
        await process.stdin.aclose()  # type: ignore[union-attr]
        assert await process.wait() == 0
    assert line is not None
    answer = loads(line)
    assert (answer["command"], answer["success"]) == ("get_tree", True)
    check_linear_tree(answer["data"], count)


async def test_rpc_client_reads_a_10_000_deep_branch(tmp_path: Path) -> None:
    """F4: ``RpcClient`` reads the ``get_tree`` answer of a session with a 10 000-entry
    side branch (it dropped the line as too deep, and the request waited for good)."""
    path = write_session(tmp_path / "branched.jsonl", 20, branch=10_000)
    script = tmp_path / "script.json"
    script.write_text("[]")
    async with open_rpc_client(args=["--faux", str(script), "--session", str(path)]) as client:
        answer = await client.request("get_tree")
    check_branched_tree(answer["data"], 20, 10_000)


async def test_library_walks_a_10_000_deep_branch(tmp_path: Path) -> None:
    """F4: every walk over a session's entries copes with a 10 000-entry branch: loading,
    the branch and its contexts, the tree and its line, a fork, resuming, exporting."""
    path = write_session(tmp_path / "branched.jsonl", 20, branch=10_000)
    loaded = load_session(path)
    assert loaded.warnings == ()
    branch = loaded.branch()
    assert [e.id for e in branch] == ["e0", "e1", *(f"b{i}" for i in range(10_000))]
    assert len(session_context(loaded)) == len(runtime_context(loaded)) == 10_002
    tree = tree_json(loaded, loaded.leaf_id)
    check_branched_tree(tree, 20, 10_000)
    check_branched_tree(loads(encode_line({"data": tree}))["data"], 20, 10_000)
    entries = entries_json(loaded, loaded.leaf_id)
    assert isinstance(entries, dict)
    assert len(entries["entries"]) == 10_020
    forked = load_session(fork_session(path, "b9998"))
    assert [e.id for e in forked.branch()][-2:] == ["b9997", "b9998"]
    async with open_session(FauxProvider([]), PLAIN, history=path) as session:
        assert len(session.messages) == 10_002
        page = await trio.Path(await session.export_html(tmp_path / "page.html")).read_text()
    assert "b9999" not in page  # entry ids are not shown; the last answer's text is
    assert "a10001" in page


def test_the_get_tree_line_of_a_2000_entry_session(tmp_path: Path) -> None:
    """F4: the ``get_tree`` answer of a 2 000-entry linear session is written as one line
    (``encode_line`` raised RecursionError) and reads back as the same tree."""
    path = write_session(tmp_path / "s.jsonl", 2_000)
    loaded = load_session(path)
    line = encode_line({"type": "response", "data": tree_json(loaded, loaded.leaf_id)})
    assert line.endswith(b']}]}],"leafId":"e1999"}}\n')
    assert line.count(b"\n") == 1
    check_linear_tree(loads(line)["data"], 2_000)


def test_deep_json_is_written_and_read_as_json_would() -> None:
    """F4: a value 20 000 levels deep is written as ``json.dumps`` writes a shallow one
    (separators, escapes, key order) and read back equal, level by level."""
    value: Any = {"leaf": ["é\u2028", 1.5, None, True, {}, []], 7: "int key"}
    for level in range(20_000):
        value = {"level": level, "children": [value, "x"]}
    text = dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert text.startswith('{"level":19999,"children":[{"level":19998,"children":[{')
    assert text.endswith(
        '{"leaf":["é\u2028",1.5,null,true,{},[]],"7":"int key"},"x"]}' + ',"x"]}' * 19_999
    )
    back = loads(text)
    for level in range(19_999, -1, -1):
        assert (back["level"], back["children"][1]) == (level, "x")
        back = back["children"][0]
    assert back == {"leaf": ["é\u2028", 1.5, None, True, {}, []], "7": "int key"}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(deadline=None, max_examples=200)
@given(_JSON, st.booleans())
def test_the_deep_path_writes_what_json_writes(value: Any, ascii_only: bool) -> None:
    """F4: with every container written by the deep path (``SHALLOW`` 0), the text is
    ``json.dumps``'s, and ``loads``' deep path reads it back."""
    separators = (",", ":")
    with mock.patch.object(_json_deep, "SHALLOW", 0):
        text = _json_deep._dumps_deep(
            value,
            json.JSONEncoder(ensure_ascii=ascii_only, separators=separators).encode,
            *separators,
        )
    assert text == json.dumps(value, ensure_ascii=ascii_only, separators=separators)
    assert _json_deep._loads_deep(text) == json.loads(text)
