"""What a session used and what it cost, from the model's prices.

``python docs/examples/usage_cost.py``.
"""

from __future__ import annotations

import trio

from trio_session import (
    FauxProvider,
    FauxReply,
    Model,
    ModelCost,
    Usage,
    open_session,
)

MODEL = Model(
    id="example-model",
    provider="faux",
    context_window=200_000,
    cost=ModelCost(
        input=3.0, output=15.0, cache_read=0.3, cache_write=3.75
    ),  # $ per million
)


async def main() -> None:
    provider = FauxProvider(
        [
            FauxReply(
                text="First answer.", usage=Usage(input=12_000, output=800)
            ),
            FauxReply(
                text="Second answer.",
                usage=Usage(input=13_000, output=600, cache_read=11_000),
            ),
        ]
    )
    async with open_session(provider, MODEL) as session:
        for question in ("first question", "second question"):
            reply = await session.prompt(question)
            print(f"{question}: ${reply.usage.cost.total:.4f}")
        stats = session.stats()
        print(
            f"tokens: {stats.tokens.input} in, {stats.tokens.output} out, "
            f"{stats.tokens.cache_read} cache reads"
        )
        print(f"total cost: ${stats.cost:.4f}")
        if (
            stats.context_usage is not None
            and stats.context_usage.percent is not None
        ):
            print(
                f"context used: {stats.context_usage.percent:.1f}% "
                f"of {MODEL.context_window}"
            )


if __name__ == "__main__":
    trio.run(main)
