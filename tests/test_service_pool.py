"""A provider shared by many sessions in a service (issue 31: 2, 5, 7, 8).

Against a real HTTP server on 127.0.0.1: the pool has the size it was given
(``limits=``, ``http.maxConnections``) and says what it holds (``pool_stats``);
``retry.provider.*`` timeouts given to ``open_session`` reach the provider; the first
request builds no TLS context in the event loop's thread; ``assert_idle`` names what a
session still runs.
"""

from __future__ import annotations

import re
import ssl
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    FauxProvider,
    Model,
    ProviderRequest,
    UserMessage,
    open_session,
)
from trio_session._commands import open_provider
from trio_session.providers._openai import OpenAIProvider

from .http_server import Exchange, ScriptedServer, event_stream, respond, sse
from .provider_support import RecordingSink

MODEL = Model(id="gpt-test", provider="openai")
REQUEST = ProviderRequest(MODEL, (UserMessage("Hi", timestamp=0),), api_key="sk-test")
NO_RETRY = {"retry": {"enabled": False}}


def chunk(content: str | None = None, finish: str | None = None) -> str:
    """A Chat Completions chunk for choice 0."""
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


ANSWER = [chunk("Hello"), chunk(finish="stop"), "data: [DONE]\n\n"]


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def openai(server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider with the default timeouts, pointed at the server."""
    async with OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider:
        yield provider


def held(release: trio.Event) -> Callable[[Exchange], Any]:
    """A step that answers only once ``release`` is set."""

    async def step(exchange: Exchange) -> None:
        await exchange.head(200)
        await release.wait()
        for text in ANSWER:
            await exchange.chunk(text)
        await exchange.end()

    return step


async def run_held(
    provider: OpenAIProvider, server: ScriptedServer, requests: int
) -> dict[str, int]:
    """``requests`` streams at once against held answers; the pool's figures while they
    all wait, before they are released and run to their end."""
    release = trio.Event()
    server.script(*(held(release) for _ in range(requests)))
    async with trio.open_nursery() as nursery:
        for _ in range(requests):
            nursery.start_soon(provider.stream, REQUEST, RecordingSink())
        await trio.testing.wait_all_tasks_blocked()
        stats = provider.pool_stats()
        release.set()
    return stats


def run_held_keys() -> tuple[str, ...]:
    """``pool_stats``'s keys, in order."""
    return (
        "requests_in_flight",
        "requests_waiting",
        "connections",
        "connections_in_use",
        "connections_idle",
    )


# -- 2: the pool's size, and what it holds ---------------------------------------------------


async def test_limits_bound_the_pool_and_pool_stats_show_it(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """limits=2 and five requests at once: 2 connections in use, 3 requests waiting; after
    them, nothing in flight or in use (what is left is idle)."""
    async with OpenAIProvider(base_url=f"{server.url}/v1", api_key="k", limits=2) as provider:
        assert provider.pool_stats() == dict.fromkeys(run_held_keys(), 0)
        assert await run_held(provider, server, 5) == {
            "requests_in_flight": 5,
            "requests_waiting": 3,
            "connections": 2,
            "connections_in_use": 2,
            "connections_idle": 0,
        }
        after = provider.pool_stats()
    kept = after["connections_idle"]  # 0-2: whether a stream's last chunk came before its end
    assert after == {
        **dict.fromkeys(run_held_keys(), 0),
        "connections": kept,
        "connections_idle": kept,
    }
    assert kept <= 2
    assert len(server.requests) == 5


async def test_default_pool_opens_a_connection_per_request(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """Without limits, httpx's 100 connections: five requests at once, five connections."""
    stats = await run_held(openai, server, 5)
    assert (stats["connections_in_use"], stats["requests_waiting"]) == (5, 0)


async def test_http_max_connections_sizes_the_cli_provider(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """http.maxConnections (open_provider's max_connections): 3 requests, 1 connection."""
    model = Model(id="gpt-test", provider="openai", api="openai-completions")
    async with open_provider(
        "openai", model=model, base_url=f"{server.url}/v1", max_connections=1
    ) as (provider, _):
        assert isinstance(provider, OpenAIProvider)
        stats = await run_held(provider, server, 3)
    assert (stats["connections"], stats["requests_waiting"]) == (1, 2)


@pytest.mark.parametrize("value", [0, -3, True, 2.5, "10"])
def test_limits_must_be_a_count_or_httpx_limits(value: object) -> None:
    """limits= refuses anything but None, a positive int or an httpx.Limits."""
    message = (
        "limits must be an httpx.Limits, a number of connections of at least 1, or None,"
        f" not {value!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        OpenAIProvider(limits=value)  # type: ignore[arg-type]


async def test_limits_with_a_client_of_ones_own_is_refused() -> None:
    """limits= sizes the client the provider makes; with client= it is an error."""
    async with httpx.AsyncClient() as client:
        with pytest.raises(
            ValueError,
            match=r"^limits= is for the client the provider makes; a client= keeps its own pool$",
        ):
            OpenAIProvider(client=client, limits=httpx.Limits(max_connections=5))


# -- 5: retry.provider.* timeouts given to open_session reach the provider ---------------------


async def test_idle_timeout_from_open_session_settings_ends_the_attempt(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """retry.provider.idleTimeoutMs 2000 in open_session(settings=): silence ends at t+2
    (the provider's own is 120 s), and the message names that limit."""
    server.script(event_stream([chunk("Hel")], after="silence"))
    settings = {"retry": {"enabled": False, "provider": {"idleTimeoutMs": 2000}}}
    async with open_session(openai, "gpt-test", settings=settings) as session:
        start = trio.current_time()
        reply = await session.prompt("Hi")
    assert trio.current_time() - start == 2.0
    assert reply.error_message == (
        "Connection error: timed out after 2s waiting for more of the response from"
        f" 127.0.0.1:{server.port}"
    )


async def test_attempt_timeout_set_on_the_store_applies_to_the_next_request(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """retry.provider.timeoutMs set while the session is open: a stream that keeps
    talking ends at t+5, with the attempt limit named."""

    async def keepalive_forever(exchange: Exchange) -> None:
        await exchange.head(200)
        await exchange.chunk(chunk("Hel"))
        while True:
            await trio.sleep(1)
            await exchange.chunk(": keep-alive\n\n")

    server.script(keepalive_forever)
    async with open_session(openai, "gpt-test", settings=NO_RETRY) as session:
        session.settings_store.set("retry.provider.timeoutMs", 5000)
        start = trio.current_time()
        reply = await session.prompt("Hi")
    assert trio.current_time() - start == 5.0
    assert reply.error_message == (
        "Connection error: timed out after 5s (the limit for one attempt) reading the"
        f" response from 127.0.0.1:{server.port}"
    )


async def test_unset_timeouts_leave_the_providers_own(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """No layer sets retry.provider.idleTimeoutMs: the provider's own 3 s holds."""
    server.script(event_stream([chunk("Hel")], after="silence"))
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1", api_key="k", timeout=3.0) as provider,
        open_session(provider, "gpt-test", settings=NO_RETRY) as session,
    ):
        start = trio.current_time()
        reply = await session.prompt("Hi")
    assert trio.current_time() - start == 3.0
    assert reply.error_message == (
        "Connection error: timed out after 3s waiting for more of the response from"
        f" 127.0.0.1:{server.port}"
    )


# -- 7: the first request builds nothing heavy in the event loop --------------------------


async def test_first_request_builds_no_tls_context_in_the_event_loop_thread(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first request (real clock) makes the client in a worker thread: every
    ssl.create_default_context call happens off the event loop's thread."""
    threads: list[int] = []
    real = ssl.create_default_context

    def recording(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", recording)
    server.script(event_stream(ANSWER))
    async with OpenAIProvider(base_url=f"{server.url}/v1", api_key="k") as provider:
        sink = RecordingSink()
        end = await provider.stream(REQUEST, sink)
    assert (end.stop_reason, sink.joined) == ("stop", "Hello")
    assert threads  # the client was made, and it built a TLS context ...
    assert threading.get_ident() not in threads  # ... but not in the loop's thread


@pytest.mark.parametrize("variable", [None, "SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_the_tls_context_built_beside_the_import_is_httpxs(
    variable: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tls_context`` (built in its own thread while httpx is imported) trusts and checks
    what httpx's own context for ``verify=True`` would, whichever CA variable is set."""
    import certifi

    from trio_session.providers._pool import tls_context

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    if variable == "SSL_CERT_FILE":  # one certificate: the store says which file was read
        pem = Path(certifi.where()).read_text().split("-----END CERTIFICATE-----")[0]
        (tmp_path / "one.pem").write_text(pem + "-----END CERTIFICATE-----\n")
        monkeypatch.setenv(variable, str(tmp_path / "one.pem"))
    elif variable == "SSL_CERT_DIR":
        monkeypatch.setenv(variable, str(tmp_path))
    ours, httpxs = tls_context(), httpx.create_ssl_context()
    seen = [
        (c.cert_store_stats(), c.verify_mode, c.check_hostname, c.options, c.minimum_version)
        for c in (ours, httpxs)
    ]
    assert seen[0] == seen[1]
    bundle = len(ssl.create_default_context(cafile=certifi.where()).get_ca_certs())
    expected_x509: dict[str | None, int] = {None: bundle, "SSL_CERT_FILE": 1, "SSL_CERT_DIR": 0}
    assert seen[0][0]["x509_ca"] == expected_x509[variable]


# -- 8: quiescence ---------------------------------------------------------------------------


async def test_assert_idle_names_a_prompt_and_its_request_in_flight(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """While a request streams: a prompt and a request in flight; after abort, idle."""
    server.script(event_stream([chunk("Hel")], after="wait_for_disconnect"))
    async with open_session(openai, "gpt-test", session_id="0123456789abcdef") as session:
        session.assert_idle()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.testing.wait_all_tasks_blocked()
            assert session.busy_with() == (
                "a prompt is running",
                "a request to openai is in flight",
            )
            with pytest.raises(AssertionError) as info:
                session.assert_idle()
            assert str(info.value) == (
                "session 0123456789ab is not idle: a prompt is running; "
                "a request to openai is in flight"
            )
            assert openai.pool_stats()["requests_in_flight"] == 1
            await session.abort()
        session.assert_idle()
        assert session.busy_with() == ()
        assert openai.pool_stats()["requests_in_flight"] == 0


async def test_assert_idle_names_a_retry_waiting_out_its_backoff(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """A 503, then the backoff: a prompt and a retry chain waiting (attempt 1)."""
    server.script(respond(503, "busy"), event_stream(ANSWER))
    replies: list[AssistantMessage] = []
    async with open_session(openai, "gpt-test") as session:
        async with trio.open_nursery() as nursery:

            async def prompt() -> None:
                replies.append(await session.prompt("Hi"))

            nursery.start_soon(prompt)
            await trio.testing.wait_all_tasks_blocked()
            assert session.is_waiting_to_retry
            assert session.busy_with() == (
                "a prompt is running",
                "a retry chain is waiting out its backoff (attempt 1)",
            )
        session.assert_idle()
    assert replies[0].text == "Hello"


async def test_assert_idle_names_a_bash_command() -> None:
    """A bash command that has not ended: named; once it is aborted, idle."""
    async with open_session(FauxProvider([]), "faux-model") as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.bash, "sleep 30")
            await trio.testing.wait_all_tasks_blocked()
            assert session.busy_with() == ("a bash command is running",)
            session.abort_bash()
        session.assert_idle()
