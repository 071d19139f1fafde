"""A loopback OpenAI-compatible server for the benchmarks that spawn agents.

``LoopbackOpenAI`` answers every ``POST …/chat/completions`` with one streamed reply of
``chunks`` text deltas as OpenAI streams them (``chat.completion.chunk`` SSE events, a
final usage chunk, ``data: [DONE]``), from a thread of this process, on 127.0.0.1. A
real HTTP server over a real socket: pi and ``trio-session rpc`` talk to it through their
own HTTP clients, exactly as to a provider.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "bench-upstream"


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def stream_body(pieces: Sequence[str]) -> bytes:
    """The whole SSE body of a reply made of ``pieces``."""
    parts = [_event(_chunk({"role": "assistant", "content": ""}))]
    parts += [_event(_chunk({"content": piece})) for piece in pieces]
    parts.append(_event(_chunk({}, "stop")))
    usage = {"prompt_tokens": 12, "completion_tokens": len(pieces), "total_tokens": 12}
    usage["total_tokens"] += len(pieces)
    parts.append(_event({**_chunk({}), "choices": [], "usage": usage}))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


class LoopbackOpenAI:
    """Serve one fixed streamed reply to every chat completions request, until closed."""

    def __init__(self, pieces: Sequence[str]) -> None:
        body = stream_body(pieces)
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                if not self.path.endswith("/chat/completions"):
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                owner.requests += 1
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> LoopbackOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
