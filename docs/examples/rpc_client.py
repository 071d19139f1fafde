"""Drive ``trio-session rpc`` from Python with RpcClient.

Run it with ``python docs/examples/rpc_client.py``. It writes a faux script
(two 503s, an answer, then one more 503) and a settings file to a temporary
directory, starts the server on them, and prints what happens:

- the first prompt fails twice; each time the client skips the backoff sleep
  with ``retry_now`` and the retry goes on, until the answer comes;
- the second prompt fails too, and the client cancels its retry with
  ``abort_retry``.

The backoff is 60 s, so without the client's commands this would take minutes.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import trio

from trio_session.rpc import RpcClient, open_rpc_client

SCRIPT = [
    {"error": "503 Service Unavailable"},
    {"error": "503 Service Unavailable"},
    {"text": "Hello!", "chunks": ["Hel", "lo!"]},
    {"error": "503 Service Unavailable"},
]
SETTINGS = {"retry": {"baseDelayMs": 60_000}}


async def run_prompt(client: RpcClient, text: str, on_retry: str) -> None:
    """Send a prompt; on each auto_retry_start send ``on_retry``; print until
    idle."""
    print(f"→ prompt {text!r}")
    with client.events() as events:
        await client.prompt(text)
        async for event in events:
            show(event)
            if event["type"] == "auto_retry_start":
                await client.request(on_retry)
                print(f"  → {on_retry}")
            if event["type"] == "agent_end" and not event["willRetry"]:
                break
            if event["type"] == "auto_retry_end" and not event["success"]:
                break
    await client.wait_for_idle()


def show(event: dict[str, Any]) -> None:
    """Print the events that tell the story."""
    kind = event["type"]
    if kind == "message_end" and event["message"]["role"] == "assistant":
        message = event["message"]
        if message["stopReason"] == "error":
            print(f"  ✗ {message['errorMessage']}")
        else:
            text = "".join(
                part["text"]
                for part in message["content"]
                if part["type"] == "text"
            )
            print(f"  assistant: {text}")
    elif kind == "auto_retry_start":
        print(
            "  ↻ auto_retry_start: "
            f"attempt {event['attempt']}/{event['maxAttempts']}, "
            f"delayMs {event['delayMs']}"
        )
    elif kind == "auto_retry_end":
        outcome = (
            "success" if event["success"] else f"failed: {event['finalError']}"
        )
        print(f"  ↻ auto_retry_end: {outcome} (attempt {event['attempt']})")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(SCRIPT), encoding="utf-8")
        settings = Path(tmp) / "settings.json"
        settings.write_text(json.dumps(SETTINGS), encoding="utf-8")
        args = ["--faux", str(script), "--settings", str(settings)]
        async with open_rpc_client(args=args) as client:
            await run_prompt(client, "Say hello", on_retry="retry_now")
            await run_prompt(client, "Once more", on_retry="abort_retry")
            state = await client.get_state()
            print(
                f"idle: isStreaming={state['isStreaming']}, "
                f"isRetrying={state['isRetrying']}, "
                f"messageCount={state['messageCount']}"
            )


if __name__ == "__main__":
    trio.run(main)
