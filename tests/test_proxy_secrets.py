"""A proxy's password is kept out of everything, in every form a server echoes it in
(issue 39, F9).

A proxy that refuses a request and quotes its ``Proxy-Authorization`` header in the
error body put ``Basic base64(user:pass)`` into the events, the session file and the
exported page: the raw and the percent-decoded password were redacted, the base64 form
was not. Here a real proxy on loopback does that, to a real ``trio-session rpc``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session.providers._error_text import redact
from trio_session.providers._proxy import proxy_secrets
from trio_session.rpc._client import open_rpc_client

from .test_provider_proxy import environment

USER = "proxy-user"
PASSWORD = "s3cr@t/pa:ss+w0rd"
QUOTED = "s3cr%40t%2Fpa%3Ass%2Bw0rd"  # as it is written in the URL


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: Every form of the password a server could echo.
FORMS = {
    "raw": PASSWORD,
    "percent-encoded": QUOTED,
    "basic": _b64(f"{USER}:{PASSWORD}"),
    "basic-unpadded": _b64(f"{USER}:{PASSWORD}").rstrip("="),
    "password-base64": _b64(PASSWORD).rstrip("="),
    "urlsafe": base64.urlsafe_b64encode(f"{USER}:{PASSWORD}".encode()).decode().rstrip("="),
}


class QuotingProxy:
    """A forward proxy on 127.0.0.1 that refuses every request with a 407 whose body quotes
    the request's headers, ``Proxy-Authorization`` included, and the URL it was given."""

    def __init__(self) -> None:
        self.authorizations: list[str] = []
        self.port = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free loopback port; report once listening."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._refuse, listeners)

    async def _refuse(self, client: trio.SocketStream) -> None:
        async with client:
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                data = await client.receive_some(65536)
                if not data:
                    return
                buffer += data
            head = buffer.partition(b"\r\n\r\n")[0].decode("latin-1")
            request_line, *headers = head.split("\r\n")
            for header in headers:
                name, _, value = header.partition(":")
                if name.lower() == "proxy-authorization":
                    self.authorizations.append(value.strip())
            url = f"http://{USER}:{QUOTED}@127.0.0.1:{self.port}"
            body = (f"407 refused {request_line} via {url} with\n" + "\n".join(headers)).encode()
            await client.send_all(
                b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                b"Content-Type: text/plain\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )


def _leaks(text: str) -> list[str]:
    """The names of the password's forms that are in ``text``."""
    return [name for name, form in FORMS.items() if form in text]


async def test_a_quoting_proxy_leaks_no_form_of_its_password(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """F9: nothing of the password — raw, percent-encoded, base64 in ``Basic``, alone — is
    in the events, RPC answers, session file, exported page or log lines."""
    proxy = QuotingProxy()
    await nursery.start(proxy.run)
    env = environment(tmp_path, HTTP_PROXY=f"http://{USER}:{QUOTED}@127.0.0.1:{proxy.port}")
    (tmp_path / "key").write_text("sk-proxytest-0123456789abcdefghij\n")
    (tmp_path / "key").chmod(0o600)
    sessions = tmp_path / "sessions"
    args = [
        *("--base-url", "http://127.0.0.1:9/v1", "--api-key-file", str(tmp_path / "key")),
        *("--session-dir", str(sessions)),
    ]
    seen: list[Any] = []
    with trio.fail_after(60):
        async with open_rpc_client(args=args, env=env, cwd=str(tmp_path)) as client:
            with client.events() as events:
                await client.prompt("hi")
                seen.append(await events.next("agent_end"))
            seen.append(await client.get_messages())
            page = await client.export_html(str(tmp_path / "page.html"))
            seen.append(page)
    assert proxy.authorizations == [f"Basic {FORMS['basic']}"]  # it was sent, and quoted
    error = seen[0]["messages"][-1]["errorMessage"]
    assert error.startswith("407 Proxy Authentication Required")
    assert "Proxy-Authorization: [redacted]" in error
    (session_file,) = sessions.glob("*.jsonl")
    places = {
        "events and answers": json.dumps(seen),
        "session file": await trio.Path(session_file).read_text(),
        "page": await trio.Path(page).read_text(),
        "log": client.stderr,
    }
    assert {place: _leaks(text) for place, text in places.items()} == {p: [] for p in places}


def test_proxy_secrets_name_every_form() -> None:
    """F9: a proxy URL's password is a secret as written, percent-decoded, and base64-encoded
    as ``user:pass`` (a ``Basic`` credential) and alone, padded or not."""
    environ = {"HTTPS_PROXY": f"http://{USER}:{QUOTED}@proxy:3128"}
    text = " ".join(FORMS.values())
    assert _leaks(redact(text, *proxy_secrets(environ))) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("via http://me:hunter22@proxy:3128/x", "via http://me:[redacted]@proxy:3128/x"),
        ("Proxy-Authorization: Basic bWU6aHVudGVyMjI=", "Proxy-Authorization: [redacted]"),
        ('"authorization": "Bearer abc.def-ghi"', '"authorization": "[redacted]"'),
        ("a plain http://proxy:3128/ stays", "a plain http://proxy:3128/ stays"),
        ("authorization: invalid api key", "authorization: invalid api key"),
        ("Basic authentication required", "Basic authentication required"),
        ("the key: Bearer sk-live-0123456789", "the key: Bearer [redacted]"),
    ],
    ids=[
        "url",
        "proxy-authorization",
        "authorization-json",
        "no-userinfo",
        "words-after-authorization",
        "basic-authentication",
        "bearer-alone",
    ],
)
def test_credentials_a_server_quotes_are_redacted_unknown(text: str, redacted: str) -> None:
    """F9: a URL's password and an ``Authorization`` header's value are redacted even when
    the secret is not one the session knows; words that are no credential stay."""
    assert redact(text) == redacted
