"""pi's agent directory, read as pi 0.73.1 reads it: settings, custom models, keys.

``trio-session chat|rpc --agent-dir DIR`` (or ``$PI_CODING_AGENT_DIR``) reads:

```text
DIR/settings.json          global settings (pi's keys; ours too)
<cwd>/.pi/settings.json    project settings, above the global ones
DIR/models.json            custom providers and models
DIR/auth.json              API keys per provider
```

``load_agent_dir`` reads the three files once and returns an ``AgentDirConfig``;
nothing in it is ever printed whole: keys stay out of ``repr``, warnings and errors.

models.json, as pi's model-registry.js reads it: ``{"providers": {NAME: {baseUrl,
api, apiKey, headers, models: [{id, name, api, baseUrl, reasoning, input,
contextWindow, maxTokens, cost}], modelOverrides}}}``, with ``//`` comments and
trailing commas allowed. A file that breaks pi's rules is not used at all (pi keeps
only its built-in models then), with a warning naming the file and the field.

Key lookup for a provider, in pi's order (auth-storage.js ``getApiKey``, then the
models.json fallback): auth.json's ``{"type": "api_key", "key": …}``; the provider's
environment variable (``OPENAI_API_KEY``, …); models.json's ``apiKey``. Both
``key`` and ``apiKey`` are resolved as pi resolves config values: ``"!command"``
runs the command in a shell and takes its trimmed output (once per process); any
other text is the name of an environment variable if one is set, else the key itself.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._classes import frozen
from ._errors import SettingsError
from ._files import RefusedFileError, read_regular
from ._settings import SettingsLayer, resolve
from .providers._base import Model, ModelCost
from .providers._models import builtin_model

#: The environment variable that names pi's agent directory.
AGENT_DIR_VARIABLE = "PI_CODING_AGENT_DIR"
#: The project directory pi reads settings from, relative to the working directory.
PROJECT_DIR_NAME = ".pi"
#: The APIs trio_session speaks, and the provider classes that speak them.
SUPPORTED_APIS = ("openai-completions", "anthropic-messages", "google-generative-ai")
#: The largest models.json or auth.json read, in bytes.
MAX_CONFIG_FILE_BYTES = 1 << 20
#: Seconds a ``"!command"`` key may take (pi's limit).
COMMAND_TIMEOUT = 10.0


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


def agent_dir_from(
    flag: str | os.PathLike[str] | None, environ: Mapping[str, str] = os.environ
) -> Path | None:
    """The agent directory of ``--agent-dir``, else ``$PI_CODING_AGENT_DIR``, else ``None``.

    As pi does, a leading ``~`` is the home directory. Without either, trio_session
    keeps its own configuration directories: pi's is read only when asked for.
    """
    raw = os.fspath(flag) if flag is not None else environ.get(AGENT_DIR_VARIABLE, "")
    return Path(raw).expanduser() if raw else None


@frozen
class _ProviderConfig:
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


@frozen
class AgentDirConfig:
    """What pi's agent directory says; see the module docstring.

    Attributes:
        path: the agent directory.
        cwd: the project directory (``<cwd>/.pi/settings.json``).
        settings_paths: the global then the project settings file (either may be missing).
        models: the custom models of models.json, in file order.
        warnings: what was not used, and why; never a key.
    """

    path: Path
    cwd: Path
    settings_paths: tuple[Path, ...]
    models: tuple[Model, ...] = ()
    warnings: tuple[str, ...] = ()
    _providers: Mapping[str, _ProviderConfig] = attrs.field(
        factory=dict, alias="providers", repr=False
    )
    _auth: Mapping[str, Any] = attrs.field(factory=dict, alias="auth", repr=False)
    _environ: Mapping[str, str] = attrs.field(
        factory=lambda: os.environ, alias="environ", repr=False
    )

    @property
    def models_path(self) -> Path:
        """``DIR/models.json``."""
        return self.path / "models.json"

    @property
    def auth_path(self) -> Path:
        """``DIR/auth.json``."""
        return self.path / "auth.json"

    def find_model(self, provider: str, model_id: str) -> Model | None:
        """The model ``provider``/``model_id``: a custom one of models.json, else one at a
        built-in provider (its endpoint, or the models.json ``baseUrl`` override; the
        context window and prices of trio_session's built-in table, if it knows the
        model; then any ``modelOverrides``), else ``None``."""
        for model in self.models:
            if model.provider == provider and model.id == model_id:
                return model
        built_in = BUILT_IN_PROVIDERS.get(provider)
        if built_in is None:
            return None
        config = self._providers.get(provider, _ProviderConfig())
        base_url = config.base_url or built_in.base_url or None
        known = builtin_model(provider, model_id, base_url=base_url)
        model = (
            attrs.evolve(known, api=built_in.api)
            if known is not None
            else Model(id=model_id, provider=provider, api=built_in.api, base_url=base_url)
        )
        if config.compat is not None:
            model = attrs.evolve(model, compat=merge_compat(model.compat, config.compat))
        override = config.model_overrides.get(model_id)
        return _overridden(model, override) if override else model

    def provider_models(self, provider: str) -> tuple[Model, ...]:
        """The custom models of ``provider``, in file order."""
        return tuple(m for m in self.models if m.provider == provider)

    def default_model(self) -> Model | None:
        """The model of the settings' ``defaultProvider``/``defaultModel`` (pi's files).

        Raises:
            SettingsError: a settings file cannot be read, or holds a bad value.
        """
        settings = resolve(SettingsLayer.from_file(p, pi=True) for p in self.settings_paths)
        if settings.default_provider is None or settings.default_model is None:
            return None
        return self.find_model(settings.default_provider, settings.default_model)

    def api_key(self, provider: str) -> str | None:
        """The key for ``provider``: auth.json, its environment variable, models.json.

        Raises:
            SettingsError: a ``"!command"`` key whose command fails or prints nothing.
                The message names the file and the provider, never the key.
        """
        entry = self._auth.get(provider)
        if isinstance(entry, Mapping) and entry.get("type") == "api_key":
            key = entry.get("key")
            if isinstance(key, str) and key:
                where = f"the key of {provider} in {self.auth_path}"
                resolved = self._resolve(key, where, quiet=True)
                if resolved:
                    return resolved
        built_in = BUILT_IN_PROVIDERS.get(provider)
        for variable in built_in.key_variables if built_in else ():
            if value := self._environ.get(variable):
                return value
        config = self._providers.get(provider)
        if config is not None and config.api_key:
            where = f"the apiKey of provider {provider} in {self.models_path}"
            return self._resolve(config.api_key, where)
        return None

    def headers(self, provider: str, model_id: str) -> dict[str, str]:
        """The extra request headers of models.json for this provider and model, resolved."""
        config = self._providers.get(provider)
        if config is None:
            return {}
        where = f"a header of provider {provider} in {self.models_path}"
        return {name: self._resolve(value, where) or "" for name, value in config.headers.items()}

    def _resolve(self, value: str, where: str, *, quiet: bool = False) -> str | None:
        """pi's ``resolveConfigValue``: ``!command``, else an env variable's value, else itself.

        ``quiet``: a failing command gives ``None`` (auth.json, as pi does) instead of an error.
        """
        if value.startswith("!"):
            output = _run_key_command(value[1:])
            if output is None and not quiet:
                msg = f"cannot resolve {where}: its command failed or printed nothing"
                raise SettingsError(msg, source=where)
            return output
        return self._environ.get(value) or value


_COMMAND_CACHE: dict[str, str | None] = {}


def _run_key_command(command: str) -> str | None:
    """The trimmed standard output of ``command`` run by the shell; ``None`` if it fails.

    Cached for the life of the process, as pi caches it. Its stderr is discarded: it
    could hold the key.
    """
    if command in _COMMAND_CACHE:
        return _COMMAND_CACHE[command]
    try:
        done = subprocess.run(  # the user's own configured command, as pi runs it
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        output = None
    else:
        text = done.stdout.decode("utf-8", errors="replace").strip()
        output = text if done.returncode == 0 and text else None
    _COMMAND_CACHE[command] = output
    return output


def _overridden(model: Model, override: Mapping[str, Any]) -> Model:
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


# -- loading ---------------------------------------------------------------------------------


def load_agent_dir(
    path: str | os.PathLike[str],
    *,
    cwd: str | os.PathLike[str],
    environ: Mapping[str, str] = os.environ,
) -> AgentDirConfig:
    """Read pi's agent directory ``path`` for the project in ``cwd``.

    Settings files are only located here (``SettingsStore`` reads them, so their
    errors are reported where the other settings files' are). A models.json or
    auth.json that cannot be used is a warning, never an error: pi starts without
    it too. Missing files are fine.
    """
    directory = Path(path)
    project = Path(cwd).absolute()
    warnings: list[str] = []
    settings_paths = (
        directory / "settings.json",
        project / PROJECT_DIR_NAME / "settings.json",
    )
    models: tuple[Model, ...] = ()
    providers: dict[str, _ProviderConfig] = {}
    models_path = directory / "models.json"
    data = _read_json(models_path, warnings, comments=True)
    if data is not None:
        try:
            providers, models = _parse_models(data)
        except _Invalid as exc:
            warnings.append(f"{models_path}: {exc}; its custom models and providers are not used")
    auth = _load_auth(directory / "auth.json", warnings)
    return AgentDirConfig(
        path=directory,
        cwd=project,
        settings_paths=settings_paths,
        models=models,
        warnings=tuple(warnings),
        providers=providers,
        auth=auth,
        environ=environ,
    )


def available_models(config: AgentDirConfig | None, current: Model) -> tuple[Model, ...]:
    """Every model a session started by the CLI may switch to: ``current`` first, then
    the custom models of models.json whose API trio_session speaks (pi's
    ``getAvailable`` lists built-in models too; we list only what we can reach)."""
    models = [current]
    for model in config.models if config is not None else ():
        if model.api in SUPPORTED_APIS and (model.provider, model.id) != (
            current.provider,
            current.id,
        ):
            models.append(model)
    return tuple(models)


class _Invalid(Exception):
    """A models.json field that breaks pi's schema; the message names the field."""


def _strip_json_comments(text: str) -> str:
    """pi's ``stripJsonComments``: ``//`` line comments and trailing commas, not in strings."""
    text = re.sub(
        r'"(?:\\.|[^"\\])*"|//[^\n]*', lambda m: m[0] if m[0].startswith('"') else "", text
    )
    return re.sub(
        r'"(?:\\.|[^"\\])*"|,(\s*[}\]])', lambda m: m[1] if m[1] is not None else m[0], text
    )


def _read_json(path: Path, warnings: list[str], *, comments: bool = False) -> Any:
    """The JSON of ``path``, or ``None`` (missing: silently; unusable: with a warning)."""
    try:
        text = read_regular(path, MAX_CONFIG_FILE_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except RefusedFileError as exc:  # a pipe or /dev/zero is refused at once, unread
        if exc.kind == "size":
            warnings.append(f"{path} is larger than {MAX_CONFIG_FILE_BYTES} bytes; not used")
        else:
            warnings.append(f"{path} is not a regular file; not used")
        return None
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        warnings.append(f"cannot read {path}: {detail}; not used")
        return None
    try:
        return json.loads(_strip_json_comments(text) if comments else text)
    except json.JSONDecodeError as exc:  # the message quotes no text of the file
        warnings.append(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}; not used"
        )
    except RecursionError:
        warnings.append(f"{path} is nested too deeply to read; not used")
    return None


def _load_auth(path: Path, warnings: list[str]) -> Mapping[str, Any]:
    data = _read_json(path, warnings)
    if data is None:
        return {}
    if not isinstance(data, dict):
        warnings.append(f"{path} must hold a JSON object, not {type(data).__name__}; not used")
        return {}
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0
    if os.name == "posix" and mode & 0o077:
        warnings.append(
            f"other users can read {path} (mode {mode:04o}); pi keeps it 0600: chmod 600 {path}"
        )
    for provider, entry in data.items():
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "oauth":
            warnings.append(
                f"{path}: {provider} has an OAuth login, which trio-session cannot use; "
                "give it an API key"
            )
        elif kind != "api_key" or not isinstance(entry.get("key"), str):
            warnings.append(f"{path}: the entry of {provider} is not an API key; not used")
    return data


def _parse_models(data: Any) -> tuple[dict[str, _ProviderConfig], tuple[Model, ...]]:
    """models.json, checked as pi's schema and ``validateConfig`` check it."""
    if not isinstance(data, dict) or not isinstance(data.get("providers"), dict):
        raise _Invalid("providers must be a JSON object")
    providers: dict[str, _ProviderConfig] = {}
    models: list[Model] = []
    for name, body in data["providers"].items():
        where = f"providers.{name}"
        if not isinstance(body, dict):
            raise _Invalid(f"{where} must be a JSON object")
        for key in ("name", "baseUrl", "apiKey", "api"):
            _check(body, key, where, _is_text, "a non-empty string")
        for key in ("headers", "modelOverrides", "compat"):
            _check(body, key, where, _is_mapping, "a JSON object")
        headers = body.get("headers", {})
        if not all(isinstance(v, str) for v in headers.values()):
            raise _Invalid(f"{where}.headers values must be strings")
        _check(body, "models", where, lambda v: isinstance(v, list), "a list")
        definitions = body.get("models", [])
        built_in = BUILT_IN_PROVIDERS.get(name)
        if not definitions:
            if not any(k in body for k in ("baseUrl", "headers", "compat", "modelOverrides")):
                raise _Invalid(
                    f'{where}: must specify "baseUrl", "headers", "compat", '
                    '"modelOverrides", or "models"'
                )
        elif built_in is None:
            for key in ("baseUrl", "apiKey"):
                if key not in body:
                    raise _Invalid(f'{where}: "{key}" is required when defining custom models')
        config = _ProviderConfig(
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
    config: _ProviderConfig,
    built_in: BuiltInProvider | None,
    body: Any,
    where: str,
) -> Model | None:
    if not isinstance(body, dict):
        raise _Invalid(f"{where} must be a JSON object")
    if not _is_text(body.get("id")):
        raise _Invalid(f"{where}.id must be a non-empty string")
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
            raise _Invalid(f"{where}.cost must hold the numbers {', '.join(parts)}")
    api = body.get("api") or config.api or (built_in.api if built_in else None)
    if api is None:
        raise _Invalid(f'{where}: no "api" specified; set it at provider or model level')
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
        raise _Invalid(f"{where}.{key} must be {description}")
