"""Built-in models: context windows, token limits and prices of the common models.

``builtin_model(provider, id)`` gives the ``Model`` the CLI uses when nothing else
describes it, so that every assistant message's ``usage.cost`` is filled in. pi's
models.json ``cost`` / ``contextWindow`` / ``maxTokens`` (a custom model, or a
``modelOverrides`` entry) win over this table, field by field.

The numbers are the public list prices in US dollars per million tokens, as the
reference's model catalog (pi-ai 0.73.1, ``models.generated.js``) carries them; the
table was copied from that catalog on 2026-12-03. Prices change: a ``Model`` with its
own ``cost``, or a models.json override, corrects one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._base import Model, ModelCost

#: The wire API of each provider name this module knows (pi's ``api`` values).
PROVIDER_APIS: Mapping[str, str] = {
    "openai": "openai-completions",
    "anthropic": "anthropic-messages",
    "gemini": "google-generative-ai",
    "google": "google-generative-ai",  # pi's name for the same API
}

_IMAGE: Any = ("text", "image")  # Any: mypy cannot type ``Model.input``'s converter


def _model(
    id: str,
    name: str,
    *,
    context: int,
    max_tokens: int,
    reasoning: bool,
    cost: tuple[float, float, float, float],
) -> Model:
    return Model(
        id=id,
        provider="",
        name=name,
        context_window=context,
        max_tokens=max_tokens,
        reasoning=reasoning,
        input=_IMAGE,  # every model here reads images
        cost=ModelCost(*cost),
    )


# -- the table (prices: input, output, cache read, cache write; $ per million tokens) ----------
# Copied 2026-12-03 from pi-ai 0.73.1's catalog. Keep it short: the default model of each
# provider and a few current ones; anything else comes from models.json or a Model in code.

_OPENAI = (
    _model("gpt-4.1-mini", "GPT-4.1 mini", context=1_047_576, max_tokens=32_768,
           reasoning=False, cost=(0.4, 1.6, 0.1, 0.0)),  # the CLI's default
    _model("gpt-4.1", "GPT-4.1", context=1_047_576, max_tokens=32_768,
           reasoning=False, cost=(2.0, 8.0, 0.5, 0.0)),
    _model("gpt-4o", "GPT-4o", context=128_000, max_tokens=16_384,
           reasoning=False, cost=(2.5, 10.0, 1.25, 0.0)),
    _model("gpt-4o-mini", "GPT-4o mini", context=128_000, max_tokens=16_384,
           reasoning=False, cost=(0.15, 0.6, 0.08, 0.0)),
    _model("gpt-5", "GPT-5", context=400_000, max_tokens=128_000,
           reasoning=True, cost=(1.25, 10.0, 0.125, 0.0)),
    _model("gpt-5-mini", "GPT-5 Mini", context=400_000, max_tokens=128_000,
           reasoning=True, cost=(0.25, 2.0, 0.025, 0.0)),
    _model("o4-mini", "o4-mini", context=200_000, max_tokens=100_000,
           reasoning=True, cost=(1.1, 4.4, 0.28, 0.0)),
)  # fmt: skip

_ANTHROPIC = (
    _model("claude-sonnet-4-5", "Claude Sonnet 4.5", context=200_000, max_tokens=64_000,
           reasoning=True, cost=(3.0, 15.0, 0.3, 3.75)),  # the CLI's default
    _model("claude-haiku-4-5", "Claude Haiku 4.5", context=200_000, max_tokens=64_000,
           reasoning=True, cost=(1.0, 5.0, 0.1, 1.25)),
    _model("claude-opus-4-5", "Claude Opus 4.5", context=200_000, max_tokens=64_000,
           reasoning=True, cost=(5.0, 25.0, 0.5, 6.25)),
    _model("claude-opus-4-1", "Claude Opus 4.1", context=200_000, max_tokens=32_000,
           reasoning=True, cost=(15.0, 75.0, 1.5, 18.75)),
)  # fmt: skip

_GEMINI = (
    _model("gemini-2.5-flash", "Gemini 2.5 Flash", context=1_048_576, max_tokens=65_536,
           reasoning=True, cost=(0.3, 2.5, 0.03, 0.0)),  # the CLI's default
    _model("gemini-2.5-pro", "Gemini 2.5 Pro", context=1_048_576, max_tokens=65_536,
           reasoning=True, cost=(1.25, 10.0, 0.125, 0.0)),
    _model("gemini-2.5-flash-lite", "Gemini 2.5 Flash Lite", context=1_048_576,
           max_tokens=65_536, reasoning=True, cost=(0.1, 0.4, 0.025, 0.0)),
    _model("gemini-2.0-flash", "Gemini 2.0 Flash", context=1_048_576, max_tokens=8_192,
           reasoning=False, cost=(0.1, 0.4, 0.025, 0.0)),
    _model("gemini-3-pro-preview", "Gemini 3 Pro Preview", context=1_000_000,
           max_tokens=64_000, reasoning=True, cost=(2.0, 12.0, 0.2, 0.0)),
    _model("gemini-3-flash-preview", "Gemini 3 Flash Preview", context=1_048_576,
           max_tokens=65_536, reasoning=True, cost=(0.5, 3.0, 0.05, 0.0)),
)  # fmt: skip

_BY_API: Mapping[str, Mapping[str, Model]] = {
    "openai-completions": {m.id: m for m in _OPENAI},
    "anthropic-messages": {m.id: m for m in _ANTHROPIC},
    "google-generative-ai": {m.id: m for m in _GEMINI},
}


def builtin_model(provider: str, id: str, *, base_url: str | None = None) -> Model | None:
    """The built-in ``Model`` for ``provider``/``id`` — context window, token limit,
    reasoning, prices — or ``None`` if the table does not know it.

    ``provider`` is one of ``"openai"``, ``"anthropic"``, ``"gemini"`` (or pi's name
    ``"google"``); the model carries that name, the provider's ``api`` and ``base_url``.

    Args:
        provider: ``"openai"``, ``"anthropic"``, ``"gemini"`` or ``"google"``.
        id: the model id, as the provider names it (``"gpt-4.1"``).
        base_url: the API root the model carries; the provider's own if omitted.

    Returns:
        The model, or ``None`` for a provider or id the table does not know.
    """
    api = PROVIDER_APIS.get(provider)
    known = _BY_API.get(api, {}).get(id) if api is not None else None
    if known is None:
        return None
    return attrs.evolve(known, provider=provider, api=api or "", base_url=base_url)
