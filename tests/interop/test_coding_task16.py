"""A coding task over RPC, against pi 1.6.0 and ``trio-session rpc`` in the same test run
(issue 42, acceptance 1).

The model (a loopback server's script) reads ``app.py``, meets a 503 (one retry), edits
the file, writes ``notes/todo.txt``, runs ``python3 app.py && cat notes/todo.txt`` in
bash, then makes an edit whose old text is absent and reads a missing file, and answers.
Both agents start with their default tools and pi-1.6's retry rules; each runs in its own
working directory with the same ``app.py``. Compared: the files left on disk, the tools
declared to the model (names and parameter names, and the schemas whole), the
``(tool, isError)`` sequence and each result's text (the working directory's path put as
``<cwd>``), the number of model requests and the retry events, and the request bodies
whole (acceptance 3), read with two differences only: the system prompt's words and the
working directory's path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.interop.retry16 import Agent, Prompt, Run, Scenario, e503, run_scenario
from trio_session.conformance._server import Stream, ToolCalls

APP = 'STATUS = 503\nprint("status", STATUS)\n'
FIXED = 'STATUS = 200\nprint("status", STATUS)\n'

CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("read", {"path": "app.py"}),
    ("edit", {"path": "app.py", "edits": [{"oldText": "STATUS = 503", "newText": "STATUS = 200"}]}),
    ("write", {"path": "notes/todo.txt", "content": "check the status\n"}),
    ("bash", {"command": "python3 app.py && cat notes/todo.txt"}),
    ("edit", {"path": "app.py", "edits": [{"oldText": "STATUS = 404", "newText": "x"}]}),
    ("read", {"path": "missing.txt"}),
)

TASK = Scenario(
    "coding-task",
    (
        ToolCalls((("call_0", *CALLS[0]),)),
        e503(),
        *(ToolCalls(((f"call_{i}", *call),)) for i, call in enumerate(CALLS) if i),
        Stream("Fixed: the status is 200."),
    ),
    (Prompt("Fix the status in app.py and note it."),),
    files={"app.py": APP},
)


@pytest.fixture(scope="module")
def runs(
    pi16_package: Path, node22: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[Agent, Run]:
    """The task, run against each agent (one after the other), in this test run."""
    base = tmp_path_factory.mktemp("coding-task")
    return {
        agent: run_scenario(agent, TASK, pi16_package, node22, base / agent)
        for agent in ("pi", "trio-session")
    }


def ends(run: Run) -> list[dict[str, Any]]:
    """The ``tool_execution_end`` events of a run."""
    return [e.data for e in run.events if e.data.get("type") == "tool_execution_end"]


def declared(body: Any) -> dict[str, list[str]]:
    """The tools a request declares: name -> its parameter names, sorted."""
    return {
        t["function"]["name"]: sorted(t["function"]["parameters"]["properties"])
        for t in body.get("tools", [])
    }


def test_the_files_on_disk_are_the_same(runs: dict[Agent, Run]) -> None:
    """Both agents leave app.py fixed and notes/todo.txt written."""
    for agent, run in runs.items():
        cwd = Path(run.cwd)
        assert (cwd / "app.py").read_text() == FIXED, agent
        assert (cwd / "notes" / "todo.txt").read_text() == "check the status\n", agent


def test_the_same_tools_are_declared(runs: dict[Agent, Run]) -> None:
    """The four default tools, with the same parameter names and the same schemas."""
    pi, ours = (runs[a].bodies[0] for a in ("pi", "trio-session"))
    assert (
        declared(ours)
        == declared(pi)
        == {
            "read": ["limit", "offset", "path"],
            "bash": ["command", "timeout"],
            "edit": ["edits", "path"],
            "write": ["content", "path"],
        }
    )
    schemas = {
        a: {t["function"]["name"]: t["function"]["parameters"] for t in runs[a].bodies[0]["tools"]}
        for a in runs
    }
    assert schemas["trio-session"] == schemas["pi"]


def test_the_same_tool_results(runs: dict[Agent, Run]) -> None:
    """The same (tool, isError) sequence — the last two errors — and the same texts."""
    shown = {}
    for agent, run in runs.items():
        shown[agent] = [
            (
                e["toolName"],
                e["isError"],
                "".join(p.get("text", "") for p in e["result"]["content"]).replace(
                    run.cwd, "<cwd>"
                ),
            )
            for e in ends(run)
        ]
    assert [(t, err) for t, err, _ in shown["pi"]] == [
        ("read", False),
        ("edit", False),
        ("write", False),
        ("bash", False),
        ("edit", True),
        ("read", True),
    ]
    assert shown["trio-session"] == shown["pi"]


def test_the_same_requests_and_retries(runs: dict[Agent, Run]) -> None:
    """8 model requests each, and one retry: the same retry events."""
    retries = {}
    for agent, run in runs.items():
        assert len(run.bodies) == 8, agent
        retries[agent] = [
            (e.data["type"], e.data.get("attempt"), e.data.get("success"))
            for e in run.events
            if e.data.get("type") in ("auto_retry_start", "auto_retry_end")
        ]
    assert retries["pi"] == [("auto_retry_start", 1, None), ("auto_retry_end", 1, True)]
    assert retries["trio-session"] == retries["pi"]


def as_compared(run: Run) -> list[Any]:
    """The run's request bodies, read with the two differences docs/tools.md lists: the
    system prompt's words (ours by design; its role is kept) and the working directory's
    path (each agent runs in its own, put as ``<cwd>``)."""
    bodies = json.loads(json.dumps(run.bodies).replace(json.dumps(run.cwd)[1:-1], "<cwd>"))
    for body in bodies:
        system = body["messages"][0]
        assert system["role"] == "system"
        assert isinstance(system["content"], str)
        system["content"] = "<system prompt>"
    return list(bodies)


def test_the_retry_resends_the_tool_result(runs: dict[Agent, Run]) -> None:
    """Acceptance 3: the request re-sent after the 503 is the failed one, whole — the
    read's result still in it, the failed answer not — for pi and for us; it equals pi's
    but for the system prompt's words and the working directory; neither history keeps
    the failed answer."""
    for agent, run in runs.items():
        first, again = run.bodies[1], run.bodies[2]
        assert again == first, agent
        assert again["messages"][-2]["tool_calls"][0]["id"] == "call_0", agent
        assert again["messages"][-1] == {
            "role": "tool",
            "content": APP,
            "tool_call_id": "call_0",
        }, agent
        stops = [m.get("stopReason") for m in run.messages if m["role"] == "assistant"]
        assert stops == ["toolUse"] * 6 + ["stop"], agent
    assert as_compared(runs["trio-session"])[2] == as_compared(runs["pi"])[2]


def test_every_request_equals_pis(runs: dict[Agent, Run]) -> None:
    """All 8 request bodies equal pi 1.6.0's: the parameters (``store: false``,
    ``max_completion_tokens``, ``stream_options``), the tools, every message — read with
    only the two differences of ``as_compared``."""
    assert as_compared(runs["trio-session"]) == as_compared(runs["pi"])


def test_the_cap_is_fitted_to_the_window_as_pis(
    pi16_package: Path, node22: Path, tmp_path: Path
) -> None:
    """With a 9000-token window the answer's cap has to fit in, every request after the
    first answer asks for the same ``max_completion_tokens`` as pi's (both estimate the
    context as the last usage plus what came after it). The first requests differ: that
    estimate counts the system prompt, whose words are ours. The working directories'
    paths are as long for both (a tool result holds one)."""
    small = attrs.evolve(
        TASK, name="small-window", model={"contextWindow": 9000, "maxTokens": 9000}
    )
    names: dict[Agent, str] = {"pi": "pi", "trio-session": "us"}
    caps = {
        agent: [
            body["max_completion_tokens"]
            for body in run_scenario(agent, small, pi16_package, node22, tmp_path / name).bodies
        ]
        for agent, name in names.items()
    }
    assert len(caps["pi"]) == 8
    assert all(cap < 9000 for cap in caps["pi"] + caps["trio-session"])
    assert caps["trio-session"][1:] == caps["pi"][1:]
