"""One worker process of ``rate_budget.py``'s ``litellm`` way: litellm's Router, on asyncio.

``python benchmarks/rate_budget_litellm.py URL RATE DURATION REDIS_PORT`` (started by
``rate_budget.py``, which sets ``BENCH_LIMITS`` to ``rpm,tpm``) builds the Router a team
following litellm's "Rate-Limit Aware v2" routing docs would: one deployment of the loopback
server with ``rpm`` and ``tpm`` set to the server's limits, ``routing_strategy
"usage-based-routing-v2"``, ``enable_pre_call_checks=True`` and ``redis_host`` /
``redis_port`` naming the benchmark's ``redis-server``, so that every worker's Router counts
in the same Redis keys; everything else as litellm sets it (its retries included). Then it
prints ``ready``, waits for ``go`` on stdin, offers a prompt every ``1 / RATE`` seconds for
``DURATION`` seconds — each a streamed ``router.acompletion`` of one user message, ``Hi``,
as our sessions send — cancels what has not been answered when the run ends, and prints the
same JSON as ``rate_budget.py``'s workers (the prompts' times to an answer and how many it
offered), with ``refused``: the prompts that ended in litellm's ``RateLimitError`` (the
Router's own refusal or the server's 429 after litellm's retries).

litellm stays out of reach of the network: ``LITELLM_LOCAL_MODEL_COST_MAP`` and
``LITELLM_OFFLINE_MODE`` make it read the model cost map it bundles instead of fetching it,
and its tokenizer comes from the files it bundles. Its usage telemetry belongs to the proxy
server, which is not run here. litellm is imported by name at run time, so that this file
type-checks and imports without it: ``pip install -e '.[bench-litellm]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import sys
import time
from typing import Any

KEY = "sk-bench-rate-budget-0000000000000000"
MODEL = "gpt-test"
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}


def router(url: str, rpm: int, tpm: int, redis_port: int) -> Any:
    """litellm's Router over the one deployment, its usage counted in the shared Redis."""
    os.environ.update(OFFLINE)  # before litellm's import reads them
    litellm: Any = importlib.import_module("litellm")
    litellm.suppress_debug_info = True
    deployment = {
        "model_name": MODEL,
        "litellm_params": {
            "model": f"openai/{MODEL}",
            "api_base": url,
            "api_key": KEY,
            "rpm": rpm,
            "tpm": tpm,
        },
    }
    return litellm.Router(
        model_list=[deployment],
        routing_strategy="usage-based-routing-v2",
        enable_pre_call_checks=True,
        redis_host="127.0.0.1",
        redis_port=redis_port,
    )


async def worker(url: str, rate: float, duration: float, redis_port: int) -> dict[str, Any]:
    """A prompt every ``1 / rate`` seconds for ``duration`` seconds after ``go``, as
    ``rate_budget.worker`` offers them; what is unanswered at the end is cancelled."""
    rpm, tpm = (int(v) for v in os.environ["BENCH_LIMITS"].split(","))
    litellm_router = router(url, rpm, tpm, redis_port)
    rate_limit_error = importlib.import_module("litellm").RateLimitError
    latencies: list[float] = []
    offered = 0
    refused = 0

    async def one() -> None:
        nonlocal refused
        start = time.monotonic()
        try:
            stream = await litellm_router.acompletion(
                model=MODEL,
                messages=[{"role": "user", "content": "Hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            finish = None
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
        except rate_limit_error:
            refused += 1
            return
        if finish == "stop":
            latencies.append(time.monotonic() - start)

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    end = time.monotonic() + duration
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(duration), asyncio.TaskGroup() as tasks:
            while time.monotonic() < end:
                tasks.create_task(one())
                offered += 1
                await asyncio.sleep(1 / rate)
            await asyncio.sleep(end - time.monotonic())
    return {"latencies": latencies, "offered": offered, "refused": refused}


def main(argv: list[str]) -> int:
    url, rate, duration, redis_port = argv
    result = asyncio.run(worker(url, float(rate), float(duration), int(redis_port)))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
