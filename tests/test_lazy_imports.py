"""What importing costs: heavy modules are loaded when used, never by ``import trio_session``.

Each check runs in a fresh interpreter, so what an earlier test imported cannot hide
what this one imports: ``sys.modules`` is read in the child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st

import trio_session

#: Never loaded by ``import trio_session`` alone.
HEAVY = (
    "httpx",
    "sqlite3",
    "rich",
    "opentelemetry",
    "trio_session.rpc",
    "trio_session.tui",
)
#: Never loaded by opening a session on the faux provider (``http``, ``dataclasses``,
#: ``email`` and ``html`` are the standard library's, but what they build on import —
#: an enum, a package, an entity table — is a session's to pay).
NOT_FOR_A_SESSION = (
    "http",
    "dataclasses",
    "email",
    "html",
    "opentelemetry",  # installed here, but nothing imported it: no provider to look for
    "httpx",
    "sqlite3",
    "rich",
    "trio_session.rpc",
    "trio_session.tui",
    "trio_session.providers._http",
    "trio_session._agent.tools",  # a session without tools: no schema code read from hints
    "trio_session._agent.tool_schema",
    "trio_session._session.bash_run",  # no bash command run: no subprocess plumbing
    "trio_session.store",  # no session file, no credential store: no storage code
    "trio_session._retry.keys",  # credential rotation: only with a credential store
    "trio_session._retry.fallback",  # only with fallback models
    "trio_session._retry.summary",  # the summary request's retries: pi-1.6 only
)


def _loaded(code: str, watched: tuple[str, ...]) -> list[str]:
    """Run ``code`` in a fresh interpreter; which of ``watched`` it left in ``sys.modules``."""
    script = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import json, sys
        print(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(result.stdout.splitlines()[-1])
    return loaded


def test_import_loads_nothing_heavy() -> None:
    """``import trio_session`` loads no HTTP client, SQLite, rich, OpenTelemetry, RPC or UI."""
    assert _loaded("import trio_session", HEAVY) == []


def test_a_faux_session_loads_no_http_sqlite_rpc_or_ui() -> None:
    """A session on the faux provider, prompted once, needs none of those either."""
    code = """
    import trio
    from trio_session import FauxProvider, FauxReply, open_session

    async def main():
        async with open_session(FauxProvider([FauxReply(text="hi")])) as session:
            reply = await session.prompt("hello")
        assert reply.text == "hi", reply

    trio.run(main)
    """
    assert _loaded(code, NOT_FOR_A_SESSION) == []


def test_every_public_name_resolves_in_a_fresh_interpreter() -> None:
    """Each name of ``__all__``, used first and alone, is the object its module defines."""
    code = """
    import importlib, sys
    import trio_session

    for name in trio_session.__all__:
        module = trio_session._EXPORTS[name]
        value = getattr(trio_session, name)
        assert value is getattr(importlib.import_module(module, "trio_session"), name), name
    from trio_session import *  # noqa: F403 - the star import goes through __all__
    """
    assert _loaded(code, ()) == []


@pytest.mark.parametrize("name", ["open_session", "RpcServer", "SqliteCredentialStore"])
def test_from_import_loads_what_the_name_needs(name: str) -> None:
    """``from trio_session import X`` works for a lazily imported name, and only ``X``'s
    module (and what it imports) is loaded: the RPC server does not load the UI."""
    loaded = _loaded(f"from trio_session import {name}", ("trio_session.tui", "rich"))
    assert loaded == []


def test_dir_lists_every_public_name_before_any_is_used() -> None:
    """``dir(trio_session)`` is complete in a fresh interpreter, before anything is used."""
    code = """
    import trio_session
    missing = set(trio_session.__all__) - set(dir(trio_session))
    assert not missing, missing
    """
    assert _loaded(code, ()) == []


def test_the_table_has_every_name_of_all() -> None:
    """Where each public name lives is written down once, for every name of ``__all__``."""
    assert sorted(trio_session._EXPORTS) == sorted(trio_session.__all__)


def test_every_rpc_name_resolves_in_a_fresh_interpreter() -> None:
    """``trio_session.rpc`` is lazy too: each of its names resolves, and importing the
    package alone loads neither the server nor the client."""
    code = """
    import importlib
    import trio_session.rpc as rpc

    assert sorted(rpc._EXPORTS) == sorted(rpc.__all__)
    assert set(rpc.__all__) <= set(dir(rpc))
    before = [m for m in ("trio_session.rpc._server", "trio_session.rpc._client")
              if m in __import__("sys").modules]
    assert before == [], before
    for name in rpc.__all__:
        module = importlib.import_module(rpc._EXPORTS[name], "trio_session.rpc")
        assert getattr(rpc, name) is getattr(module, name), name
    """
    assert _loaded(code, ()) == []


def test_the_cli_default_attempt_timeout_is_the_providers() -> None:
    """``_commands`` keeps its own copy of the default (so as not to import httpx for it)."""
    from trio_session import _commands
    from trio_session.providers import _http

    assert _commands.DEFAULT_ATTEMPT_TIMEOUT == _http.DEFAULT_ATTEMPT_TIMEOUT


RPC_FAUX = [{"text": "hello"}]


def test_rpc_start_up_loads_no_ui_no_sqlite_no_http(tmp_path: Path) -> None:
    """``trio-session rpc --faux`` answers ``get_state`` without loading the terminal UI,
    rich, SQLite, httpx, the bash runner or the terminal's key prompt (the real process,
    its imports read from ``-X importtime``)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(RPC_FAUX))
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("PI_CODING_AGENT_DIR", None)
    result = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "trio_session",
            "rpc",
            "--faux",
            str(script),
            "--no-session",
        ],
        input=b'{"id": "s", "type": "get_state"}\n',
        capture_output=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    answer = json.loads(result.stdout.splitlines()[0])
    assert answer["id"] == "s"
    assert answer["success"] is True
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "trio_session.rpc._server" in imported  # the reading is real
    heavy = {
        "trio_session.tui",
        "rich",
        "sqlite3",
        "httpx",
        "trio_session.providers._http",
        "trio_session.rpc._client",
        "trio_session.rpc._bash",  # made at the first bash command
        "getpass",  # a key asked for at a terminal: not with a key configured
    }
    assert imported & heavy == set()


def _httpx_url_problem(url: str) -> str | None:
    """What ``_url_problem`` said before its fast path: httpx's parse, always (and, since
    issue 39, a port past 65535, which httpx takes, refused)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "is not a URL"
    if parsed.scheme not in ("http", "https"):
        return "is not an absolute http:// or https:// URL"
    if not parsed.host:
        return "has no host"
    if parsed.port is not None and parsed.port > 65535:
        return f"has port {parsed.port}, past the last one (65535)"
    return None


URL_EDGES = [
    "http://127.0.0.1:9/v1",
    "https://api.openai.com/v1",
    "http://localhost:8080",
    "http://999.0.0.1/v1",
    "http://1.2.3.4.5/v1",
    "http://01.2.3.4/",
    "http://-/",
    "http://./v1",
    "http://a..b/",
    "http://x:99999/v1",
    "http://x:/v1",
    "HTTP://x/v1",
    "http://X/v1",
    "http:///v1",
    "http://",
    "ftp://x/",
    "localhost:8080",
    "http://x/ v1",
    "http://x/v1?q=1",
    "http://x\t/v1",
    "http://[::1]:8080/v1",
    "http://bücher.example/v1",
    "http://x/" + "a" * 70000,
    "",
]


@pytest.mark.parametrize("url", URL_EDGES)
def test_url_check_without_httpx_says_what_httpx_says(url: str) -> None:
    """The pre-flight's fast path (no httpx import for a plain URL) agrees with httpx."""
    from trio_session._commands import _url_problem

    assert _url_problem(url) == _httpx_url_problem(url)


@hypothesis.settings(deadline=None, max_examples=300)
@hypothesis.given(
    url=st.builds(
        lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
        st.sampled_from(["http", "https", "HTTP", "ftp", ""]),
        st.text(alphabet="abcXYZ019.-_[]:%", max_size=20),
        st.sampled_from(["", ":", ":0", ":80", ":443", ":99999", ":x"]),
        st.text(alphabet="abc/._~-?#% ", max_size=20),
    )
)
def test_url_check_agrees_with_httpx_on_generated_urls(url: str) -> None:
    """On URLs built near the fast path's edges, the answer is httpx's."""
    from trio_session._commands import _url_problem

    assert _url_problem(url) == _httpx_url_problem(url)


def test_an_http_provider_imports_httpx_when_it_first_needs_it() -> None:
    """Made (as the ``rpc`` command makes it), an OpenAI provider has not imported httpx;
    its timeout is the same ``httpx.Timeout`` as before once asked for."""
    code = """
    import sys
    from trio_session._commands import preflight, provider_timeouts
    from trio_session import Model, OpenAIProvider

    model = Model(id="m", provider="local", api="openai-completions",
                  base_url="http://127.0.0.1:9/v1")
    preflight(model, base_url=None, api_key=None)
    provider = OpenAIProvider(
        base_url="http://127.0.0.1:9/v1",
        **provider_timeouts(attempt_timeout=600.0, idle_timeout=30.0),
    )
    default = OpenAIProvider()
    assert "httpx" not in sys.modules
    import httpx

    assert provider.timeout == httpx.Timeout(30.0, connect=10.0)
    assert default.timeout == httpx.Timeout(120.0, connect=10.0)
    from trio_session.providers import _http

    assert _http.DEFAULT_TIMEOUT == default.timeout
    assert "Timeout(connect=10.0, read=120.0" in repr(OpenAIProvider())
    """
    assert _loaded(code, ()) == []


def test_httpx_comes_without_its_command_line_tool() -> None:
    """The client an HTTP provider makes at its first request imports httpx without
    httpx's ``httpx`` command (click, rich, pygments: some 30 ms), which this package
    never runs; a program that wants the command can still import it or call
    ``httpx.main``."""
    import importlib.util

    # httpx imports its command only where click is installed: the test extra has it
    # (mkdocs needs it), so the check below is not vacuous.
    assert importlib.util.find_spec("click") is not None
    code = """
    import sys
    import trio
    from trio_session.providers._pool import make_client_off_loop

    client = trio.run(make_client_off_loop, 5.0, None)
    assert type(client).__name__ == "AsyncClient", client
    watched = ("httpx", "httpx._main", "click", "rich", "pygments")
    loaded = [name for name in watched if name in sys.modules]
    assert loaded == ["httpx"], loaded
    import contextlib, io
    import httpx
    with contextlib.redirect_stdout(io.StringIO()) as out:  # httpx.main: the tool, on call
        httpx.main(["--help"], standalone_mode=False)
    assert "Usage: httpx" in out.getvalue(), out.getvalue()
    import httpx._main  # still there for a program that asks for it
    """
    assert _loaded(code, ()) == []


def test_subpackages_are_attributes_after_a_bare_import() -> None:
    """``import trio_session`` then ``trio_session.rpc.X`` works, as when the package
    imported its subpackages itself; each is imported only when asked for."""
    code = """
    import sys
    import trio_session

    assert "trio_session.rpc" not in sys.modules
    assert trio_session.rpc.LineSplitter is not None
    assert trio_session.providers.__name__ == "trio_session.providers"
    assert trio_session.store.__name__ == "trio_session.store"
    assert "trio_session.tui" not in sys.modules
    """
    assert _loaded(code, ()) == []
