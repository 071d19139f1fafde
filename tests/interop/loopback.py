"""The loopback OpenAI-compatible server both agents talk to in the interop scenario.

One ``ScriptedServer`` (``tests/http_server.py``) on 127.0.0.1 answers
``POST /v1/chat/completions`` by the *tag* that starts the last user message of the
request — ``"[interop:retry] …"`` has the tag ``retry`` — so the same prompt gets the same
reply from pi and from trio-session however many other requests each made before it:

- ``retry*``: the first request with that tag gets a 503, every later one a reply.
- ``gate*``: the reply's head and first text chunk, then nothing more until the
  driver calls ``POST /control/release`` or the client hangs up (an abort). The gate
  is set before the head goes out, so a release that follows the first chunk (the
  driver waits for its ``message_update``) is never lost.
- any other tag, or none (a compaction summary request): a streamed text reply.

Replies are SSE ``chat.completion.chunk`` events with a final usage chunk, as OpenAI
streams them. The driver reaches ``/control/*`` with the same base URL; a fresh
``InteropServer`` is made for each agent so both start from the same state.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs
import trio

from tests.http_server import Exchange, ScriptedServer, sse

#: Requests one scenario may make at most; the rest get ``418``, never a loop.
MAX_REQUESTS = 100

#: The model id every reply claims, whichever model was asked for.
REPLY_MODEL = "interop-upstream"

_TAG = re.compile(r"^\[interop:([a-z0-9-]+)\]")

#: Usage reported with every reply: fixed, so both agents price the same numbers.
PROMPT_TOKENS = 120
COMPLETION_TOKENS = 30
CACHED_TOKENS = 20


def reply_text(tag: str | None) -> str:
    """What the model answers to a request with ``tag`` (none: a summary request)."""
    if tag is None:
        return "Summary: the user and the assistant exchanged interop test messages."
    return f"Reply to {tag}."


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return sse(
        {
            "id": "chatcmpl-interop",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": REPLY_MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def _usage_chunk() -> str:
    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS},
    }
    return sse(
        {
            "id": "chatcmpl-interop",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": REPLY_MODEL,
            "choices": [],
            "usage": usage,
        }
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def request_tag(body: Any) -> str | None:
    """The tag of the last user message of a chat completions request body, if any."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            match = _TAG.match(_text_of(message.get("content")).lstrip())
            return match.group(1) if match else None
    return None


@attrs.define(eq=False)
class InteropServer:
    """The scripted server plus the state its routing keeps (tags seen, the gate)."""

    http: ScriptedServer = attrs.field(factory=ScriptedServer)
    seen: dict[str, int] = attrs.field(factory=dict)
    tags: list[str | None] = attrs.field(factory=list)
    _release: trio.Event = attrs.field(factory=trio.Event)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL: ``http://127.0.0.1:PORT/v1``."""
        return f"{self.http.url}/v1"

    async def run(self, *, task_status: trio.TaskStatus[InteropServer]) -> None:
        """Serve on 127.0.0.1 until cancelled; report ready with ``task_status.started``."""
        self.http.script(*[self._route] * MAX_REQUESTS)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.http.run)
            task_status.started(self)

    async def _route(self, exchange: Exchange) -> None:
        request = exchange.request
        if request.path == "/control/release":
            self._release.set()
            await exchange.respond(200, b"{}")
            return
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            await exchange.respond(404, json.dumps({"error": {"message": "not found"}}))
            return
        tag = request_tag(request.json())
        self.tags.append(tag)
        count = self.seen[tag or ""] = self.seen.get(tag or "", 0) + 1
        if tag is not None and tag.startswith("retry") and count == 1:
            body = {"error": {"message": "Service Unavailable", "type": "server_error"}}
            await exchange.respond(503, json.dumps(body), content_type="application/json")
            return
        await self._stream(exchange, tag)

    async def _stream(self, exchange: Exchange, tag: str | None) -> None:
        text = reply_text(tag)
        first, rest = text[:6], text[6:]
        gated = tag is not None and tag.startswith("gate")
        if gated:
            self._release = trio.Event()  # before the first chunk can bring a release
        release = self._release
        await exchange.head(200)
        await exchange.chunk(_chunk({"role": "assistant", "content": first}))
        if gated:
            hung_up = trio.Event()
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    await exchange.wait_for_disconnect()
                    hung_up.set()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                await release.wait()
                nursery.cancel_scope.cancel()
            if hung_up.is_set():
                return
        await exchange.chunk(_chunk({"content": rest}))
        await exchange.chunk(_chunk({}, "stop"))
        await exchange.chunk(_usage_chunk())
        await exchange.chunk("data: [DONE]\n\n")
        await exchange.end()
