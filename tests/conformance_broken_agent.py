"""Deliberately broken agents for the conformance kit's self-test: our ``rpc``, broken in
one way each.

``python conformance_broken_agent.py MODE ARGS`` runs ``trio-session rpc ARGS`` broken as
MODE says. Two kinds:

- Output modes run ``python -m trio_session rpc ARGS`` as a child and rewrite its stdout
  line by line; everything else (its requests, its sleeps) is the real agent's.
  ``drop-end`` drops every ``auto_retry_end``; ``double-end`` writes each twice;
  ``attempt-off`` adds 1 to ``auto_retry_start.attempt``; ``jitter`` announces 70 % of
  each ``delayMs`` (and still sleeps the real one); ``never-settles`` drops every
  ``agent_settled``; ``no-disposition`` drops ``data.disposition`` from every response;
  ``oh-my-pi-names`` (not broken: a known alias) writes ``compaction_*`` as
  ``auto_compaction_*``, the names of the seed's fork.
- Patched modes run the rpc in this process with one piece of the retry policy replaced:
  ``sleeps-long`` / ``sleeps-short`` sleep twice / a quarter the delay they announce;
  ``retries-overflow`` takes a context overflow for a retryable error;
  ``retries-never-retry`` retries what the seed's R-5 retries, never-retry list or not;
  ``one-too-many`` makes one more attempt than ``maxRetries``; ``ignores-abort-retry``
  answers ``abort_retry`` and does nothing; ``no-cap`` reads no ``maxAgentDelayMs``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

OUTPUT_MODES = (
    "oh-my-pi-names",
    "drop-end",
    "double-end",
    "attempt-off",
    "jitter",
    "never-settles",
    "no-disposition",
)
PATCHED_MODES = (
    "sleeps-long",
    "sleeps-short",
    "retries-overflow",
    "retries-never-retry",
    "one-too-many",
    "ignores-abort-retry",
    "no-cap",
)


def _rewrite(mode: str, event: dict[str, Any]) -> list[dict[str, Any]]:
    """What the broken agent writes for one line the real one wrote."""
    kind = event.get("type")
    if mode == "drop-end" and kind == "auto_retry_end":
        return []
    if mode == "double-end" and kind == "auto_retry_end":
        return [event, event]
    if mode == "attempt-off" and kind == "auto_retry_start":
        return [{**event, "attempt": int(event["attempt"]) + 1}]
    if mode == "jitter" and kind == "auto_retry_start":
        return [{**event, "delayMs": round(int(event["delayMs"]) * 0.7)}]
    if mode == "oh-my-pi-names" and kind in ("compaction_start", "compaction_end"):
        return [{**event, "type": f"auto_{kind}"}]
    if mode == "never-settles" and kind == "agent_settled":
        return []
    if mode == "no-disposition" and kind == "response" and isinstance(event.get("data"), dict):
        data = {k: v for k, v in event["data"].items() if k != "disposition"}
        return [{**event, "data": data}]
    return [event]


def run_rewritten(mode: str, args: list[str]) -> int:
    """An output mode: the real agent as a child, its stdout rewritten."""
    command = [sys.executable, "-m", "trio_session", "rpc", *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE) as child:
        assert child.stdout is not None
        for line in child.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                sys.stdout.buffer.write(line)
            else:
                for out in _rewrite(mode, event):
                    sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    return child.returncode


def _patch(mode: str) -> None:
    """Replace one piece of the retry policy in this process."""
    from trio_session import AgentSession
    from trio_session._retry import backoff, chain, policy
    from trio_session._retry.classify import CLASSIFIERS
    from trio_session._retry.decide import Next

    real_start = chain.RetryChain._start_attempt
    if mode in ("sleeps-long", "sleeps-short"):
        factor = 2.0 if mode == "sleeps-long" else 0.25

        async def sleeps(self: Any, host: Any, message: Any, step: Any) -> Any:
            started = await real_start(self, host, message, step)
            self._pending_delay_ms = int(self._pending_delay_ms * factor)
            return started

        chain.RetryChain._start_attempt = sleeps  # type: ignore[method-assign]
    elif mode == "one-too-many":
        given: set[int] = set()  # the chains that had their extra attempt

        async def one_more(self: Any, host: Any, message: Any, step: Any) -> Any:
            if step is Next.GIVE_UP and id(self) not in given:
                given.add(id(self))
                step = Next.RETRY
            return await real_start(self, host, message, step)

        chain.RetryChain._start_attempt = one_more  # type: ignore[method-assign]
    elif mode in ("retries-overflow", "retries-never-retry"):
        real_choice: Callable[..., Any] = getattr(policy, "classifier_of")  # noqa: B009
        seed = CLASSIFIERS["seed"]

        class Broken:
            def __init__(self, real: Any) -> None:
                self.real = real

            def is_context_overflow(self, message: Any, window: int | None = None) -> bool:
                if mode == "retries-overflow":
                    return False
                return bool(self.real.is_context_overflow(message, window))

            def is_retryable(self, message: Any, window: int | None = None) -> bool:
                if mode == "retries-overflow":
                    return bool(
                        self.real.is_retryable(message, window)
                        or self.real.is_context_overflow(message, window)
                    )
                return bool(self.real.is_retryable(message, window) or seed.is_retryable(message))

            def __getattr__(self, name: str) -> Any:
                return getattr(self.real, name)

        setattr(policy, "classifier_of", lambda retry, own=None: Broken(real_choice(retry, own)))  # noqa: B010
    elif mode == "ignores-abort-retry":
        setattr(AgentSession, "abort_retry", lambda self: None)  # noqa: B010
    elif mode == "no-cap":
        setattr(backoff, "agent_delay_cap", lambda settings: None)  # noqa: B010


def main() -> int:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode in OUTPUT_MODES:
        return run_rewritten(mode, args)
    if mode not in PATCHED_MODES:
        sys.stderr.write(f"unknown mode {mode!r}\n")
        return 2
    _patch(mode)
    from trio_session.cli import main as cli

    return cli(["rpc", *args])


if __name__ == "__main__":
    sys.exit(main())
