"""The environment's HTTP proxies: HTTP_PROXY / HTTPS_PROXY / ALL_PROXY, and NO_PROXY.

pi honours them; so do the HTTP providers, through a real forward proxy on loopback
(written here: it records each request line and relays the request to the model
server) and a real ``trio-session rpc`` process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio

from trio_session.providers._proxy import proxy_routes, proxy_secrets
from trio_session.rpc._client import open_rpc_client

from .http_server import ScriptedServer
from .test_cli import answer_stream

KEY = "sk-proxytest-0123456789abcdefghij"


class ForwardProxy:
    """A plain-HTTP forward proxy on 127.0.0.1: absolute-form requests, relayed as they are."""

    def __init__(self) -> None:
        self.request_lines: list[str] = []
        self.port = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free loopback port; report once listening."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._relay, listeners)

    async def _relay(self, client: trio.SocketStream) -> None:
        async with client:
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                data = await client.receive_some(65536)
                if not data:
                    return
                buffer += data
            head, _, body = buffer.partition(b"\r\n\r\n")
            request_line, *headers = head.decode("latin-1").split("\r\n")
            self.request_lines.append(request_line)
            method, target, version = request_line.split(" ")
            url = urlsplit(target)
            assert url.hostname is not None
            assert url.port is not None
            kept = [h for h in headers if not h.lower().startswith(("proxy-", "connection:"))]
            forwarded = "\r\n".join([f"{method} {url.path} {version}", *kept, "Connection: close"])
            async with await trio.open_tcp_stream(url.hostname, url.port) as upstream:
                await upstream.send_all(forwarded.encode("latin-1") + b"\r\n\r\n" + body)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_pump, client, upstream)  # the rest of the request body
                    await _pump(upstream, client)
                    nursery.cancel_scope.cancel()


async def _pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
    """Copy ``source`` to ``sink`` until either side is done. A side may also reset its
    connection (the rpc process exits once it has its answer): for a proxy that is an
    end like any other."""
    try:
        while data := await source.receive_some(65536):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


def environment(tmp_path: Path, **proxies: str) -> dict[str, str]:
    """This environment without proxies or keys, private dirs, and ``proxies`` set."""
    environ = {
        k: v
        for k, v in os.environ.items()
        if "proxy" not in k.lower() and not k.endswith("_API_KEY")
    }
    return environ | {
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        **proxies,
    }


async def ask_through(tmp_path: Path, server: ScriptedServer, env: dict[str, str]) -> str:
    """One prompt of ``rpc`` at ``server``, in ``env``; everything it wrote, as text."""
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    args = ["--base-url", f"{server.url}/v1", "--api-key-file", str(key_file), "--no-session"]
    seen: list[Any] = []
    with trio.fail_after(60):
        async with open_rpc_client(args=args, env=env, cwd=str(tmp_path)) as client:
            with client.events() as events:
                await client.prompt("hi")
                seen.append(await events.next("agent_end"))
            seen.append(await client.get_messages())
    assert client.stderr == ""
    assert seen[0]["messages"][-1]["content"] == [{"type": "text", "text": "Hi"}]
    return json.dumps(seen) + client.stderr


async def test_rpc_goes_through_http_proxy(tmp_path: Path, nursery: trio.Nursery) -> None:
    """HTTP_PROXY routes the provider's request through the proxy, in absolute form; the
    key is in no event, message or log line."""
    server, proxy = ScriptedServer(), ForwardProxy()
    await nursery.start(server.run)
    await nursery.start(proxy.run)
    server.script(answer_stream("Hi"))
    output = await ask_through(tmp_path, server, environment(tmp_path, HTTP_PROXY=proxy.url))
    assert proxy.request_lines == [f"POST {server.url}/v1/chat/completions HTTP/1.1"]
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in output


async def test_no_proxy_goes_direct(tmp_path: Path, nursery: trio.Nursery) -> None:
    """A host in NO_PROXY is reached directly: the proxy sees nothing."""
    server, proxy = ScriptedServer(), ForwardProxy()
    await nursery.start(server.run)
    await nursery.start(proxy.run)
    server.script(answer_stream("Hi"))
    env = environment(tmp_path, http_proxy=proxy.url, NO_PROXY="example.com, 127.0.0.1")
    await ask_through(tmp_path, server, env)
    assert proxy.request_lines == []
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]


@pytest.mark.parametrize(
    ("environ", "routes"),
    [
        ({}, {}),
        ({"NO_PROXY": "127.0.0.1"}, {}),
        (
            {"HTTPS_PROXY": "proxy:3128"},
            {"https://": "http://proxy:3128"},
        ),
        (
            {"ALL_PROXY": "http://p:1", "http_proxy": "http://h:2", "HTTP_PROXY": "http://H:3"},
            {"http://": "http://h:2", "https://": "http://p:1"},
        ),
        (
            {"HTTP_PROXY": "http://p:1", "NO_PROXY": "localhost,.corp.example,::1,10.0.0.1"},
            {
                "http://": "http://p:1",
                "all://localhost": None,
                "all://*.corp.example": None,
                "all://[::1]": None,
                "all://10.0.0.1": None,
            },
        ),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "a.example,*"}, {}),
    ],
)
def test_proxy_routes(environ: dict[str, str], routes: dict[str, str | None]) -> None:
    """The variables read as curl reads them: lower case first, ALL_PROXY as the fallback,
    NO_PROXY hosts go direct, ``*`` turns proxying off."""
    assert proxy_routes(environ) == routes


def test_a_proxy_password_is_a_secret() -> None:
    """A password in a proxy URL is redacted from error texts, as a key is: as written,
    percent-decoded and base64-encoded (issue 39, F9)."""
    environ = {"HTTPS_PROXY": "http://me:s3cr%40t@proxy:3128", "NO_PROXY": "x"}
    assert sorted(proxy_secrets(environ)) == [
        "bWU6czNjckB0",  # base64("me:s3cr@t"): the Basic credential
        "czNjckB0",  # base64 of the password alone
        "s3cr%40t",
        "s3cr@t",
    ]
