"""Every runnable example under docs/examples runs and prints what the docs say."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from .http_server import ScriptedServer, Step, event_stream, respond, sse

EXAMPLES = sorted((Path(__file__).parent.parent / "docs" / "examples").glob("*.py"))

#: The example that talks to a real model: the tests below run it against a loopback server.
REAL_MODEL = Path(__file__).parent.parent / "docs" / "examples" / "real_model.py"


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e != REAL_MODEL], ids=lambda p: p.name)
def test_example_runs(example: Path) -> None:
    """The example exits 0 without writing to stderr."""
    result = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_retry_timeline_matches_the_docs() -> None:
    """docs/index.md's default timeline: retries at 2 s and 6 s, prompt() returns at 6 s."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "retry_timeline.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert [line[:7] for line in out] == ["t= 0.0s"] * 3 + ["t= 2.0s"] * 3 + ["t= 6.0s"] * 4
    assert "'delayMs': 2000" in out[2]
    assert "'delayMs': 4000" in out[5]
    assert out[-1] == "t= 6.0s  prompt() returned: 'Hello!'"


def test_readme_python_blocks_run(tmp_path: Path) -> None:
    """Every ```python block in README.md runs as written."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```python\n")[1:]]
    assert blocks, "README.md has no python example"
    for i, block in enumerate(blocks):
        script = tmp_path / f"readme_{i}.py"
        script.write_text(block, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr


DOC_PAGES = sorted((Path(__file__).parent.parent / "docs").glob("*.md"))
LOCAL_SERVER = "http://127.0.0.1:8080/v1"  # what docs/providers.md's local example names


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a docs page that are written there (not a copy of an
    example file: tests/test_docs_plain.py checks those equal their file, and
    test_example_runs runs the file)."""
    parts = page.read_text(encoding="utf-8").split("```python\n")
    return [
        b.split("```", 1)[0]
        for before, b in itertools.pairwise(parts)
        if not before.rstrip("\n").rsplit("\n", 1)[-1].startswith("<!-- example: ")
    ]


def test_doc_pages_hold_python_blocks() -> None:
    """The block runner below has the docs' examples to run (a guard against a parse slip)."""
    blocks = [b for page in DOC_PAGES for b in python_blocks(page)]
    assert len(blocks) >= 5


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.name)
async def test_doc_page_python_blocks_run(page: Path, nursery: trio.Nursery) -> None:
    """Every ```python block in docs/*.md runs: whole programs (``trio.run``) as a process
    against a loopback OpenAI-compatible server, definitions by exec."""
    server = ScriptedServer()
    await nursery.start(server.run)
    done = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    hello = sse({"choices": [{"index": 0, "delta": {"content": "Hello!"}}]})
    for block in python_blocks(page):
        if "trio.run(" not in block:
            exec(compile(block, str(page), "exec"), {"__name__": "docs_block"})
            continue
        server.script(event_stream([hello, done, "data: [DONE]\n\n"]))
        environ = dict(os.environ)
        environ |= {"OPENAI_API_KEY": "sk-docs-test", "OPENAI_BASE_URL": f"{server.url}/v1"}
        program = block.replace(LOCAL_SERVER, f"{server.url}/v1")
        result = await trio.run_process(
            [sys.executable, "-c", program],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=environ,
        )
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout.decode() == "Hello!\n"


def test_stream_reply_example_shows_the_text_that_stands_and_the_restart() -> None:
    """docs/examples/stream_reply.py: plain iteration yields only the answer that stands;
    ``items()`` yields the failed attempt live, the restart mark, then the answer, at
    the times docs/embedding.md prints."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "stream_reply.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out == [
        "plain iteration: the text that stands",
        "  t=4.0s  'Backoff waits 2 s, then 4 s, then 8 s.'",
        "items(): live, with a restart mark",
        "  t=0.0s  'Backoff waits '",
        "  t=0.5s  '2 s, '",
        "  t=0.5s  restart: take back 'Backoff waits 2 s, '",
        "  t=2.5s  'Backoff waits '",
        "  t=3.0s  '2 s, '",
        "  t=3.5s  'then 4 s, '",
        "  t=4.0s  'then 8 s.'",
        "done at t=4.0s: Backoff waits 2 s, then 4 s, then 8 s.",
    ]
    page = (Path(__file__).parent.parent / "docs" / "embedding.md").read_text(encoding="utf-8")
    assert "\n".join(out) in page


async def run_real_model(
    server: ScriptedServer, *steps: Step, key: str = "sk-docs-test"
) -> subprocess.CompletedProcess[bytes]:
    """docs/examples/real_model.py as a process, its endpoint (``OPENAI_BASE_URL``) the
    loopback ``server`` answering with ``steps``."""
    server.script(*steps)
    environ = os.environ | {"OPENAI_API_KEY": key, "OPENAI_BASE_URL": f"{server.url}/v1"}
    return await trio.run_process(
        [sys.executable, str(REAL_MODEL)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=environ,
    )


def answer(text: str) -> Step:
    """A Chat Completions stream that answers ``text``."""
    delta = sse({"choices": [{"index": 0, "delta": {"content": text}}]})
    done = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return event_stream([delta, done, "data: [DONE]\n\n"])


async def test_real_model_example_prints_the_answer(nursery: trio.Nursery) -> None:
    """getting-started's real-model program prints the answer, nothing on stderr, exit 0."""
    server = await nursery.start(ScriptedServer().run)
    result = await run_real_model(server, answer("Too many requests."))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"Too many requests.\n", b"")
    assert server.requests[0].headers["authorization"] == "Bearer sk-docs-test"


async def test_real_model_example_with_a_bad_key_exits_1_naming_the_failure(
    nursery: trio.Nursery,
) -> None:
    """Issue 45, acceptance 3: a 401 ends the program at once with exit 1 and one line on
    stderr naming the failure (not an empty line and exit 0); the key is not in it."""
    server = await nursery.start(ScriptedServer().run)
    body = {
        "error": {
            "message": "Incorrect API key provided: sk-wrong-0123. You can find your API key"
            " at https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    result = await run_real_model(server, respond(401, body), key="sk-wrong-0123")
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr.decode() == (
        "AuthenticationError: 401 Unauthorized: Incorrect API key provided: [redacted]. You "
        "can find your API key at https://platform.openai.com/account/api-keys. "
        "(invalid_api_key)\n"
    )
    assert len(server.requests) == 1  # a 401 is not retried


async def test_real_model_example_tells_each_retry(nursery: trio.Nursery) -> None:
    """A 503 is retried after 2 s, and the wait is told on stderr while it lasts, on one
    line, the quoted header left out; then the answer comes and the program exits 0."""
    server = await nursery.start(ScriptedServer().run)
    overloaded = respond(
        503, {"error": {"message": "The server is overloaded"}}, [("retry-after", "1")]
    )
    result = await run_real_model(server, overloaded, answer("Too many requests."))
    assert (result.returncode, result.stdout) == (0, b"Too many requests.\n")
    assert result.stderr.decode() == (
        "retry 1/3 in 2 s after: 503 Service Unavailable: The server is overloaded\n"
    )


def test_typed_errors_example_raises_a_connection_error() -> None:
    """docs/examples/typed_errors.py: an unreachable server is a typed, retryable error."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "typed_errors.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out[0].startswith("ProviderConnectionError from openai: Connection error: ")
    assert out[1] == "retryable: True"
    assert "sk-example" not in "\n".join(out)


#: Fenced blocks that are not code to copy: program output and drawings (``text``, whose
#: fit the browser test checks) and JSON records, one per line (``json``, ``.wrap``).
NOT_CODE = re.compile(r"text|json|\{\.(text|json) \.wrap\}")


def fenced_blocks(page: Path) -> list[tuple[int, str, list[str]]]:
    """The fenced blocks of a Markdown page: first line number, info string, lines."""
    blocks = []
    lines = page.read_text(encoding="utf-8").splitlines()
    opened: tuple[int, str, str] | None = None  # (line number, fence, info string)
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        fence = re.match(r"\s*(`{3,}|~{3,})(.*)", line)
        if opened is None and fence:
            opened, body = (number, fence.group(1), fence.group(2).strip()), []
        elif opened is not None and line.strip() == opened[1]:
            blocks.append((opened[0], opened[2], body))
            opened = None
        elif opened is not None:
            body.append(line)
    return blocks


def test_code_examples_fit_80_columns() -> None:
    """Every code example of the docs -- fenced code in docs/*.md (not output or JSON
    records) and each docs/examples/*.py -- fits in 80 columns, so none scrolls."""
    docs = Path(__file__).parent.parent / "docs"
    wide = []
    for page in DOC_PAGES:
        for start, info, body in fenced_blocks(page):
            if NOT_CODE.fullmatch(info):
                continue
            for offset, line in enumerate(body, 1):
                if len(line) > 80:
                    wide.append(f"{page.name}:{start + offset}: {len(line)} columns")
    for example in sorted((docs / "examples").glob("*.py")):
        for number, line in enumerate(example.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > 80:
                wide.append(f"examples/{example.name}:{number}: {len(line)} columns")
    assert wide == []


def test_fenced_blocks_are_found() -> None:
    """The block reader above sees the kinds of block the check needs to see."""
    (index,) = [p for p in DOC_PAGES if p.name == "getting-started.md"]
    infos = {info for _, info, _ in fenced_blocks(index)}
    assert {"bash", "python", "text"} <= infos
