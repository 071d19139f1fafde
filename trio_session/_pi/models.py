"""models.json, as pi's model registry reads it: pi's built-in providers, the schema's
checks, a provider's and a model's ``compat`` merged, ``modelOverrides`` applied.

``{"providers": {NAME: {baseUrl, api, apiKey, headers, compat, models: [{id, name, api,
baseUrl, reasoning, input, contextWindow, maxTokens, cost, compat}], modelOverrides}}}``.
``parse_models`` checks a parsed file as pi's schema and ``validateConfig`` do and raises
``InvalidModels`` naming the field; ``config.py:load_agent_dir`` reads the file and turns
that into a warning. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._core.classes import frozen
from ..providers._base import Model, ModelCost


@frozen
class BuiltInProvider:
    """One of pi's built-in providers: its wire API, endpoint and key variables."""

    api: str
    base_url: str
    key_variables: tuple[str, ...] = ()


#: pi's built-in providers (pi-ai 0.73.1: ``getProviders()``, the first model's api and
#: baseUrl, env-api-keys.js). pi talks to ``openai`` over its Responses API; OpenAI
#: serves Chat Completions at the same root, and that is what trio_session speaks.
BUILT_IN_PROVIDERS: Mapping[str, BuiltInProvider] = {
    "amazon-bedrock": BuiltInProvider(
        "bedrock-converse-stream", "https://bedrock-runtime.us-east-1.amazonaws.com"
    ),
    "anthropic": BuiltInProvider(
        "anthropic-messages", "https://api.anthropic.com", ("ANTHROPIC_API_KEY",)
    ),
    "azure-openai-responses": BuiltInProvider(
        "azure-openai-responses", "", ("AZURE_OPENAI_API_KEY",)
    ),
    "cerebras": BuiltInProvider(
        "openai-completions", "https://api.cerebras.ai/v1", ("CEREBRAS_API_KEY",)
    ),
    "cloudflare-ai-gateway": BuiltInProvider("anthropic-messages", "", ("CLOUDFLARE_API_KEY",)),
    "cloudflare-workers-ai": BuiltInProvider("openai-completions", "", ("CLOUDFLARE_API_KEY",)),
    "deepseek": BuiltInProvider(
        "openai-completions", "https://api.deepseek.com", ("DEEPSEEK_API_KEY",)
    ),
    "fireworks": BuiltInProvider(
        "anthropic-messages", "https://api.fireworks.ai/inference", ("FIREWORKS_API_KEY",)
    ),
    "github-copilot": BuiltInProvider(
        "anthropic-messages",
        "https://api.individual.githubcopilot.com",
        ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
    ),
    "google": BuiltInProvider(
        "google-generative-ai",
        "https://generativelanguage.googleapis.com/v1beta",
        ("GEMINI_API_KEY",),
    ),
    "google-vertex": BuiltInProvider("google-vertex", "", ("GOOGLE_CLOUD_API_KEY",)),
    "groq": BuiltInProvider(
        "openai-completions", "https://api.groq.com/openai/v1", ("GROQ_API_KEY",)
    ),
    "huggingface": BuiltInProvider(
        "openai-completions", "https://router.huggingface.co/v1", ("HF_TOKEN",)
    ),
    "kimi-coding": BuiltInProvider(
        "anthropic-messages", "https://api.kimi.com/coding", ("KIMI_API_KEY",)
    ),
    "minimax": BuiltInProvider(
        "anthropic-messages", "https://api.minimax.io/anthropic", ("MINIMAX_API_KEY",)
    ),
    "minimax-cn": BuiltInProvider(
        "anthropic-messages", "https://api.minimaxi.com/anthropic", ("MINIMAX_CN_API_KEY",)
    ),
    "mistral": BuiltInProvider(
        "mistral-conversations", "https://api.mistral.ai", ("MISTRAL_API_KEY",)
    ),
    "moonshotai": BuiltInProvider(
        "openai-completions", "https://api.moonshot.ai/v1", ("MOONSHOT_API_KEY",)
    ),
    "moonshotai-cn": BuiltInProvider(
        "openai-completions", "https://api.moonshot.cn/v1", ("MOONSHOT_API_KEY",)
    ),
    "openai": BuiltInProvider(
        "openai-completions", "https://api.openai.com/v1", ("OPENAI_API_KEY",)
    ),
    "openai-codex": BuiltInProvider("openai-codex-responses", "https://chatgpt.com/backend-api"),
    "opencode": BuiltInProvider(
        "openai-completions", "https://opencode.ai/zen/v1", ("OPENCODE_API_KEY",)
    ),
    "opencode-go": BuiltInProvider(
        "openai-completions", "https://opencode.ai/zen/go/v1", ("OPENCODE_API_KEY",)
    ),
    "openrouter": BuiltInProvider(
        "openai-completions", "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",)
    ),
    "vercel-ai-gateway": BuiltInProvider(
        "anthropic-messages", "https://ai-gateway.vercel.sh", ("AI_GATEWAY_API_KEY",)
    ),
    "xai": BuiltInProvider("openai-completions", "https://api.x.ai/v1", ("XAI_API_KEY",)),
    "xiaomi": BuiltInProvider(
        "anthropic-messages", "https://api.xiaomimimo.com/anthropic", ("XIAOMI_API_KEY",)
    ),
    "zai": BuiltInProvider(
        "openai-completions", "https://api.z.ai/api/coding/paas/v4", ("ZAI_API_KEY",)
    ),
}


@frozen
class ProviderConfig:
    """One provider entry of models.json, as written (key and headers unresolved)."""

    base_url: str | None = None
    api: str | None = None
    api_key: str | None = attrs.field(default=None, repr=False)
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    model_overrides: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    compat: Mapping[str, Any] | None = attrs.field(default=None, hash=False)


#: The ``compat`` keys whose objects pi merges key by key (its ``mergeCompat``).
_NESTED_COMPAT = (
    "openRouterRouting",
    "vercelGatewayRouting",
    "chatTemplateKwargs",
    "chatTemplateArgs",
)


def merge_compat(
    base: Mapping[str, Any] | None, override: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """pi's ``mergeCompat``: ``override``'s keys over ``base``'s, the routing and
    chat-template objects merged key by key."""
    if override is None:
        return base
    merged = {**(base or {}), **override}
    for key in _NESTED_COMPAT:
        below, above = (base or {}).get(key), override.get(key)
        if isinstance(below, Mapping) or isinstance(above, Mapping):
            merged[key] = {
                **(below if isinstance(below, Mapping) else {}),
                **(above if isinstance(above, Mapping) else {}),
            }
    return merged


def overridden(model: Model, override: Mapping[str, Any]) -> Model:
    """pi's ``applyModelOverride`` for the fields a ``Model`` has."""
    changes: dict[str, Any] = {}
    for key, field in (
        ("name", "name"),
        ("reasoning", "reasoning"),
        ("input", "input"),
        ("contextWindow", "context_window"),
        ("maxTokens", "max_tokens"),
    ):
        if key in override:
            changes[field] = override[key]
    cost = override.get("cost")
    if isinstance(cost, Mapping):
        base = model.cost
        changes["cost"] = ModelCost(
            input=cost.get("input", base.input),
            output=cost.get("output", base.output),
            cache_read=cost.get("cacheRead", base.cache_read),
            cache_write=cost.get("cacheWrite", base.cache_write),
        )
    compat = override.get("compat")
    if isinstance(compat, Mapping):
        changes["compat"] = merge_compat(model.compat, compat)
    return attrs.evolve(model, **changes)


class InvalidModels(Exception):
    """A models.json field that breaks pi's schema; the message names the field."""


def parse_models(data: Any) -> tuple[dict[str, ProviderConfig], tuple[Model, ...]]:
    """models.json, checked as pi's schema and ``validateConfig`` check it."""
    if not isinstance(data, dict) or not isinstance(data.get("providers"), dict):
        raise InvalidModels("providers must be a JSON object")
    providers: dict[str, ProviderConfig] = {}
    models: list[Model] = []
    for name, body in data["providers"].items():
        where = f"providers.{name}"
        if not isinstance(body, dict):
            raise InvalidModels(f"{where} must be a JSON object")
        for key in ("name", "baseUrl", "apiKey", "api"):
            _check(body, key, where, _is_text, "a non-empty string")
        for key in ("headers", "modelOverrides", "compat"):
            _check(body, key, where, _is_mapping, "a JSON object")
        headers = body.get("headers", {})
        if not all(isinstance(v, str) for v in headers.values()):
            raise InvalidModels(f"{where}.headers values must be strings")
        _check(body, "models", where, lambda v: isinstance(v, list), "a list")
        definitions = body.get("models", [])
        built_in = BUILT_IN_PROVIDERS.get(name)
        if not definitions:
            if not any(k in body for k in ("baseUrl", "headers", "compat", "modelOverrides")):
                raise InvalidModels(
                    f'{where}: must specify "baseUrl", "headers", "compat", '
                    '"modelOverrides", or "models"'
                )
        elif built_in is None:
            for key in ("baseUrl", "apiKey"):
                if key not in body:
                    raise InvalidModels(f'{where}: "{key}" is required when defining custom models')
        config = ProviderConfig(
            base_url=body.get("baseUrl"),
            api=body.get("api"),
            api_key=body.get("apiKey"),
            headers=dict(headers),
            model_overrides=dict(body.get("modelOverrides", {})),
            compat=body.get("compat"),
        )
        providers[name] = config
        for index, definition in enumerate(definitions):
            model = _parse_model(name, config, built_in, definition, f"{where}.models[{index}]")
            if model is not None:
                models.append(model)
    return providers, tuple(models)


def _parse_model(
    provider: str,
    config: ProviderConfig,
    built_in: BuiltInProvider | None,
    body: Any,
    where: str,
) -> Model | None:
    if not isinstance(body, dict):
        raise InvalidModels(f"{where} must be a JSON object")
    if not _is_text(body.get("id")):
        raise InvalidModels(f"{where}.id must be a non-empty string")
    for key in ("name", "api", "baseUrl"):
        _check(body, key, where, _is_text, "a non-empty string")
    _check(body, "compat", where, _is_mapping, "a JSON object")
    _check(body, "reasoning", where, lambda v: isinstance(v, bool), "true or false")
    _check(
        body,
        "input",
        where,
        lambda v: isinstance(v, list) and all(i in ("text", "image") for i in v),
        'a list of "text" and "image"',
    )
    for key in ("contextWindow", "maxTokens"):
        _check(body, key, where, lambda v: _is_number(v) and v > 0, "a positive number")
    cost = body.get("cost")
    if cost is not None:
        parts = ("input", "output", "cacheRead", "cacheWrite")
        if not isinstance(cost, dict) or not all(_is_number(cost.get(p)) for p in parts):
            raise InvalidModels(f"{where}.cost must hold the numbers {', '.join(parts)}")
    api = body.get("api") or config.api or (built_in.api if built_in else None)
    if api is None:
        raise InvalidModels(f'{where}: no "api" specified; set it at provider or model level')
    base_url = body.get("baseUrl") or config.base_url or (built_in.base_url if built_in else None)
    if not base_url:
        return None  # pi skips such a model too
    return Model(
        id=body["id"],
        provider=provider,
        name=body.get("name") or body["id"],
        api=api,
        base_url=base_url,
        reasoning=body.get("reasoning", False),
        input=tuple(body.get("input", ("text",))),
        context_window=int(body.get("contextWindow", 128_000)),
        max_tokens=int(body.get("maxTokens", 16_384)),
        cost=ModelCost(
            input=cost["input"],
            output=cost["output"],
            cache_read=cost["cacheRead"],
            cache_write=cost["cacheWrite"],
        )
        if cost is not None
        else ModelCost(),
        compat=merge_compat(config.compat, body.get("compat")),
    )


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_mapping(value: Any) -> bool:
    return isinstance(value, dict)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(body: Mapping[str, Any], key: str, where: str, test: Any, description: str) -> None:
    if key in body and not test(body[key]):
        raise InvalidModels(f"{where}.{key} must be {description}")
