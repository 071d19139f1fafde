"""pi's configuration read as pi 0.73.1 reads it: agent dir, settings keys, models, keys."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session import Settings, SettingsError, SettingsLayer, SettingsStore
from trio_session._commands import CommandError, load_settings, provider_class, select_model
from trio_session._core.codec import model_to_json
from trio_session._pi.config import (
    AgentDirConfig,
    agent_dir_from,
    available_models,
    load_agent_dir,
)
from trio_session._settings.store import MOOT_PROVIDER_RETRIES
from trio_session.providers._anthropic import AnthropicProvider
from trio_session.providers._base import Model, ModelCost
from trio_session.providers._openai import OpenAIProvider
from trio_session.rpc._client import open_rpc_client

from .http_server import ScriptedServer, event_stream, sse

SECRET = "sk-local-SECRETkeyaaaaaaaaaaaaaaaaaaa"
AUTH_SECRET = "sk-auth-SECRETkeybbbbbbbbbbbbbbbbbbb"

#: pi's own settings.json, as pi writes it: many of pi's keys, ours among them.
PI_SETTINGS: dict[str, Any] = {
    "lastChangelogVersion": "0.73.1",
    "defaultProvider": "local",
    "defaultModel": "qwen-coder",
    "defaultThinkingLevel": "medium",
    "theme": "dark",
    "steeringMode": "all",
    "followUpMode": "one-at-a-time",
    "enabledModels": ["claude-*", "gpt-4o"],
    "compaction": {"enabled": True, "reserveTokens": 8192, "keepRecentTokens": 12000},
    "retry": {"maxRetries": 5, "provider": {"timeoutMs": 3_600_000, "maxRetryDelayMs": 30_000}},
    "terminal": {"showImages": False},
    "warnings": {"anthropicExtraUsage": False},
    "packages": ["pi-skills"],
}


def models_json(base_url: str, **provider: Any) -> str:
    """A models.json with one custom OpenAI-compatible provider, with comments and commas."""
    body = {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": "LOCAL_LLM_KEY",
        "models": [
            {
                "id": "qwen-coder",
                "name": "Qwen Coder",
                "reasoning": True,
                "input": ["text", "image"],
                "contextWindow": 32768,
                "maxTokens": 4096,
                "cost": {"input": 0.5, "output": 1.5, "cacheRead": 0.05, "cacheWrite": 0.6},
            },
            {"id": "tiny"},
            {"id": "codestral", "api": "mistral-conversations"},
        ],
        **provider,
    }
    text = json.dumps({"providers": {"local": body}}, indent=2)
    # pi strips // comments and trailing commas (outside strings)
    return "// my models\n" + text.replace('"tiny"\n', '"tiny", // small\n', 1)[:-2] + ",\n}\n"


def write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def agent_dir(tmp_path: Path, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    directory = tmp_path / "agent"
    write(directory / "settings.json", json.dumps(PI_SETTINGS, indent=2))
    write(directory / "models.json", models_json(base_url))
    return directory


# -- locating the agent directory -----------------------------------------------------------


def test_agent_dir_is_the_flag_else_the_variable_else_none(tmp_path: Path) -> None:
    """--agent-dir wins over PI_CODING_AGENT_DIR; without either, pi's dir is not read."""
    env = {"PI_CODING_AGENT_DIR": str(tmp_path / "env")}
    assert agent_dir_from(str(tmp_path / "flag"), env) == tmp_path / "flag"
    assert agent_dir_from(None, env) == tmp_path / "env"
    assert agent_dir_from(None, {}) is None
    assert agent_dir_from(None, {"PI_CODING_AGENT_DIR": ""}) is None
    assert agent_dir_from("~/pi", {}) == Path.home() / "pi"


# -- models.json ------------------------------------------------------------------------------


def test_models_json_gives_the_custom_models(tmp_path: Path) -> None:
    """models.json's providers and models become Models with pi's defaults filled in."""
    config = load_agent_dir(agent_dir(tmp_path), cwd=tmp_path)
    base = "http://127.0.0.1:9/v1"
    assert config.warnings == ()
    image_input: Any = ("text", "image")  # Model's converter is untyped for mypy
    assert config.models == (
        Model(
            input=image_input,
            id="qwen-coder",
            provider="local",
            name="Qwen Coder",
            api="openai-completions",
            base_url=base,
            reasoning=True,
            context_window=32768,
            max_tokens=4096,
            cost=ModelCost(input=0.5, output=1.5, cache_read=0.05, cache_write=0.6),
        ),
        Model(id="tiny", provider="local", api="openai-completions", base_url=base),
        Model(id="codestral", provider="local", api="mistral-conversations", base_url=base),
    )
    assert config.settings_paths == (
        tmp_path / "agent" / "settings.json",
        tmp_path / ".pi" / "settings.json",
    )


def test_models_json_compat_is_merged_as_pi_merges_it(tmp_path: Path) -> None:
    """A provider's ``compat`` under its models' (pi's ``mergeCompat``: keys over keys, the
    routing objects key by key) reaches the Model and its RPC object (issue 41, row 4)."""
    provider = {
        "compat": {"supportsDeveloperRole": False, "openRouterRouting": {"only": ["a"]}},
        "models": [
            {"id": "plain"},
            {
                "id": "tuned",
                "compat": {"supportsStore": False, "openRouterRouting": {"order": ["b"]}},
            },
        ],
    }
    directory = tmp_path / "agent"
    write(directory / "models.json", models_json("http://127.0.0.1:9/v1", **provider))
    config = load_agent_dir(directory, cwd=tmp_path)
    assert config.warnings == ()
    plain, tuned = config.models
    assert plain.compat == provider["compat"]
    assert model_to_json(tuned)["compat"] == {
        "supportsDeveloperRole": False,
        "openRouterRouting": {"only": ["a"], "order": ["b"]},
        "supportsStore": False,
    }
    assert "compat" not in model_to_json(Model(id="m", provider="p"))


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        pytest.param(
            {"models": [{"id": "m", "contextWindow": 0}]},
            "providers.local.models[0].contextWindow must be a positive number",
            id="zero-context",
        ),
        pytest.param(
            {"apiKey": None},
            "providers.local.apiKey must be a non-empty string",
            id="null-key",
        ),
        pytest.param(
            {"models": [{"id": "m", "input": ["audio"]}]},
            'providers.local.models[0].input must be a list of "text" and "image"',
            id="bad-input",
        ),
    ],
)
def test_a_broken_models_json_is_a_warning_and_unused(
    tmp_path: Path, provider: dict[str, Any], message: str
) -> None:
    """A models.json that breaks pi's schema is not used at all, with a warning naming the field."""
    directory = tmp_path / "agent"
    path = write(directory / "models.json", models_json("http://127.0.0.1:9/v1", **provider))
    config = load_agent_dir(directory, cwd=tmp_path)
    assert config.models == ()
    assert config.warnings == (f"{path}: {message}; its custom models and providers are not used",)


def test_a_custom_provider_needs_base_url_and_key(tmp_path: Path) -> None:
    """As pi: custom models of a provider that is not built in need baseUrl and apiKey."""
    directory = tmp_path / "agent"
    data = {"providers": {"mine": {"api": "openai-completions", "models": [{"id": "m"}]}}}
    path = write(directory / "models.json", json.dumps(data))
    config = load_agent_dir(directory, cwd=tmp_path)
    assert config.warnings == (
        f'{path}: providers.mine: "baseUrl" is required when defining custom models; '
        "its custom models and providers are not used",
    )


def test_models_json_that_is_not_json_names_the_place(tmp_path: Path) -> None:
    """Unparsable models.json: a warning with line and column, none of the file's text."""
    directory = tmp_path / "agent"
    path = write(directory / "models.json", '{"providers": {"x": {"apiKey": "sk-SECRET" ')
    config = load_agent_dir(directory, cwd=tmp_path)
    (warning,) = config.warnings
    assert warning.startswith(f"{path} is not valid JSON: ")
    assert "SECRET" not in warning


# -- keys ----------------------------------------------------------------------------------------


def config_with_keys(
    tmp_path: Path, api_key: str, auth: dict[str, Any] | None = None, **environ: str
) -> AgentDirConfig:
    directory = tmp_path / "agent"
    write(directory / "models.json", models_json("http://127.0.0.1:9/v1", apiKey=api_key))
    if auth is not None:
        write(directory / "auth.json", json.dumps(auth))
    return load_agent_dir(directory, cwd=tmp_path, environ=environ)


def test_models_json_key_is_an_env_variable_name_or_a_literal(tmp_path: Path) -> None:
    """apiKey names an environment variable if one is set, else it is the key itself."""
    by_name = config_with_keys(tmp_path, "LOCAL_LLM_KEY", LOCAL_LLM_KEY=SECRET)
    assert by_name.api_key("local") == SECRET
    literal = config_with_keys(tmp_path, SECRET)
    assert literal.api_key("local") == SECRET
    assert literal.api_key("elsewhere") is None


def test_models_json_key_from_a_command(tmp_path: Path) -> None:
    """A "!command" apiKey is the command's trimmed output."""
    command = f"!{sys.executable} -c \"print('  {SECRET}  ')\""
    assert config_with_keys(tmp_path, command).api_key("local") == SECRET


def test_a_failing_key_command_is_a_clear_error_without_the_key(tmp_path: Path) -> None:
    """A "!command" that fails: the error names file and provider, never the command's text."""
    config = config_with_keys(tmp_path, f"!{sys.executable} -c 'import sys; sys.exit(3)' {SECRET}")
    expected = (
        f"cannot resolve the apiKey of provider local in {tmp_path / 'agent' / 'models.json'}: "
        "its command failed or printed nothing"
    )
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        config.api_key("local")


def test_auth_json_comes_before_env_and_models_json(tmp_path: Path) -> None:
    """pi's order: auth.json's api_key, then the provider's env variable, then models.json."""
    auth = {"local": {"type": "api_key", "key": AUTH_SECRET}}
    config = config_with_keys(tmp_path, SECRET, auth, OPENAI_API_KEY="sk-env")
    assert config.api_key("local") == AUTH_SECRET
    assert config.api_key("openai") == "sk-env"
    (tmp_path / "agent" / "auth.json").unlink()
    assert config_with_keys(tmp_path, SECRET).api_key("local") == SECRET


def test_auth_json_oauth_and_loose_mode_are_warnings(tmp_path: Path) -> None:
    """An OAuth login cannot be used and says so; a readable auth.json is named; no key shown."""
    directory = tmp_path / "agent"
    auth = {
        "anthropic": {"type": "oauth", "access": AUTH_SECRET, "refresh": "r", "expires": 1},
        "openai": {"type": "api_key", "key": AUTH_SECRET},
    }
    path = write(directory / "auth.json", json.dumps(auth), mode=0o644)
    config = load_agent_dir(directory, cwd=tmp_path, environ={})
    assert config.warnings == (
        f"other users can read {path} (mode 0644); pi keeps it 0600: chmod 600 {path}",
        f"{path}: anthropic has an OAuth login, which trio-session cannot use; give it an API key",
    )
    assert config.api_key("anthropic") is None
    assert config.api_key("openai") == AUTH_SECRET
    assert AUTH_SECRET not in repr(config)


# -- choosing the model -------------------------------------------------------------------------


def test_default_model_comes_from_pi_settings_project_above_global(tmp_path: Path) -> None:
    """defaultProvider/defaultModel: the project's .pi/settings.json wins over the global one."""
    config = load_agent_dir(agent_dir(tmp_path), cwd=tmp_path)
    model = config.default_model()
    assert model is not None
    assert (model.provider, model.id, model.context_window) == ("local", "qwen-coder", 32768)
    write(tmp_path / ".pi" / "settings.json", '{"defaultModel": "tiny"}')
    model = config.default_model()
    assert model is not None
    assert (model.provider, model.id) == ("local", "tiny")


def test_select_model_flags_then_settings(tmp_path: Path) -> None:
    """--provider/--model win; else defaultProvider/defaultModel; PROVIDER/ID names both."""
    config = load_agent_dir(agent_dir(tmp_path), cwd=tmp_path)
    settings = Settings(default_provider="local", default_model="qwen-coder")

    def pick(provider: str | None, model_id: str | None) -> tuple[str, str, str]:
        m = select_model(provider=provider, model_id=model_id, settings=settings, agent_dir=config)
        return m.provider, m.id, m.api

    assert pick(None, None) == ("local", "qwen-coder", "openai-completions")
    assert pick(None, "tiny") == ("local", "tiny", "openai-completions")
    assert pick("openai", None) == ("openai", "gpt-4.1-mini", "openai-completions")
    assert pick(None, "anthropic/claude-x") == ("anthropic", "claude-x", "anthropic-messages")
    assert pick("groq", "llama") == ("groq", "llama", "openai-completions")
    ours = Settings(default_provider="anthropic", default_model="claude-x")
    no_agent = select_model(provider=None, model_id=None, settings=ours, agent_dir=None)
    assert (no_agent.provider, no_agent.id) == ("anthropic", "claude-x")
    no_agent = select_model(provider="openai", model_id=None, settings=ours, agent_dir=None)
    assert (no_agent.provider, no_agent.id) == ("openai", "gpt-4.1-mini")


def test_select_model_errors_name_what_is_missing(tmp_path: Path) -> None:
    """Unknown provider, unknown model, unsupported api: each a CommandError saying which."""
    config = load_agent_dir(agent_dir(tmp_path), cwd=tmp_path)
    models = tmp_path / "agent" / "models.json"
    with pytest.raises(CommandError, match=f"^provider 'local' has no model 'big' in {models} "):
        select_model(provider="local", model_id="big", settings=Settings(), agent_dir=config)
    expected = (
        f"unknown provider 'nowhere': neither one of pi's built-in providers nor defined in "
        f"{models}"
    )
    with pytest.raises(CommandError, match=f"^{re.escape(expected)}$"):
        select_model(provider="nowhere", model_id="m", settings=Settings(), agent_dir=config)
    with pytest.raises(CommandError, match=r"^unknown provider 'local'; choose openai, "):
        select_model(provider="local", model_id=None, settings=Settings(), agent_dir=None)
    codestral = config.find_model("local", "codestral")
    assert codestral is not None
    expected = (
        "model local/codestral uses the api 'mistral-conversations', which trio-session does "
        "not speak (it speaks openai-completions, anthropic-messages and google-generative-ai)"
    )
    with pytest.raises(CommandError, match=f"^{re.escape(expected)}$"):
        provider_class(codestral)
    assert provider_class(Model(id="x", provider="openai")) is OpenAIProvider
    assert provider_class(Model(id="x", provider="kimi-coding")) is AnthropicProvider


def test_available_models_current_first_then_what_we_can_reach(tmp_path: Path) -> None:
    """available_models: the current model, then models.json's models of a supported api."""
    config = load_agent_dir(agent_dir(tmp_path), cwd=tmp_path)
    tiny = config.find_model("local", "tiny")
    assert tiny is not None
    assert [m.id for m in available_models(config, tiny)] == ["tiny", "qwen-coder"]
    other = Model(id="gpt-4.1-mini", provider="openai")
    assert [m.id for m in available_models(config, other)] == ["gpt-4.1-mini", "qwen-coder", "tiny"]
    assert available_models(None, other) == (other,)


# -- pi's settings keys ---------------------------------------------------------------------------


def test_pi_settings_load_without_a_warning(tmp_path: Path) -> None:
    """Every key of pi's settings.json is accepted; the ones we use mean what they mean in pi."""
    path = write(tmp_path / "settings.json", json.dumps(PI_SETTINGS))
    layer = SettingsLayer.from_file(path, pi=True)
    assert layer.warnings == ()
    settings = SettingsStore([layer]).current
    assert (settings.steering_mode, settings.follow_up_mode) == ("all", "one-at-a-time")
    assert settings.default_thinking_level == "medium"
    assert (settings.default_provider, settings.default_model) == ("local", "qwen-coder")
    assert (settings.compaction.reserve_tokens, settings.compaction.keep_recent_tokens) == (
        8192,
        12000,
    )
    assert settings.retry.max_retries == 5
    assert settings.retry.provider.timeout_ms == 3_600_000
    assert settings.retry.provider.max_retry_delay_ms == 30_000


def test_pi_defaults_where_pi_keys_are_unset() -> None:
    """Unset, pi's keys have pi's defaults (settings-manager.js getters)."""
    settings = Settings()
    assert (settings.steering_mode, settings.follow_up_mode) == ("one-at-a-time", "one-at-a-time")
    assert settings.default_thinking_level is None
    assert (settings.compaction.reserve_tokens, settings.compaction.keep_recent_tokens) == (
        16384,
        20000,
    )
    assert settings.retry.provider.max_retries is None


def test_legacy_max_delay_means_what_pi_means_in_pi_files(tmp_path: Path) -> None:
    """In pi's files retry.maxDelayMs is pi's legacy retry.provider.maxRetryDelayMs; in ours
    it keeps its R-28 meaning (a cap on every wait)."""
    path = write(tmp_path / "settings.json", '{"retry": {"maxDelayMs": 5000}}')
    pi = SettingsStore([SettingsLayer.from_file(path, pi=True)]).current.retry
    assert (pi.max_delay_ms, pi.provider.max_retry_delay_ms) == (None, 5000)
    ours = SettingsStore([SettingsLayer.from_file(path)]).current.retry
    assert (ours.max_delay_ms, ours.provider.max_retry_delay_ms) == (5000, 60_000)
    text = '{"retry": {"maxDelayMs": 5000, "provider": {"maxRetryDelayMs": 7}}}'
    both = write(tmp_path / "both.json", text)
    pi = SettingsStore([SettingsLayer.from_file(both, pi=True)]).current.retry
    assert pi.provider.max_retry_delay_ms == 7


def test_unknown_keys_anywhere_are_warnings_not_errors(tmp_path: Path) -> None:
    """Keys no one knows, in our files or pi's, at the top or in a group: warned, not fatal."""
    data = {"retry": {"maxRetry": 2, "enabled": False}, "compaction": {"x": 1}, "myTool": {}}
    path = write(tmp_path / "settings.json", json.dumps(data))
    layer = SettingsLayer.from_file(path)
    assert layer.values == {"retry.enabled": False}
    assert layer.warnings == (
        "retry.maxRetry is not a known setting (known retry keys: enabled, maxRetries, "
        "baseDelayMs, maxDelayMs, jitter, respectRetryAfter, classifier, profile, "
        "maxAgentDelayMs, sharedCooldown, maxTotalMs, provider.maxRetryDelayMs, "
        "provider.timeoutMs, "
        f"provider.idleTimeoutMs, provider.maxRetries) (in {path}); ignored",
        "compaction.x is not a known setting (known compaction keys: enabled, "
        f"keepRecentTurns, reserveTokens, keepRecentTokens) (in {path}); ignored",
        "myTool is not a known setting (known groups: retry.*, compaction.*, credentials.*, "
        "http.*, rateLimit.*) "
        f"(in {path}); ignored",
    )


def test_provider_max_retries_zero_loads_silently(tmp_path: Path) -> None:
    """retry.provider.maxRetries 0, pi's own recommendation, loads without a warning (R-28a)."""
    path = write(tmp_path / "settings.json", '{"retry": {"provider": {"maxRetries": 0}}}')
    layer = SettingsLayer.from_file(path, pi=True)
    assert layer.values == {"retry.provider.maxRetries": 0}
    assert layer.warnings == ()


def test_provider_max_retries_above_zero_is_warned_moot(tmp_path: Path) -> None:
    """retry.provider.maxRetries 2 loads, and its file gets one warning: providers never retry."""
    path = write(tmp_path / "settings.json", '{"retry": {"provider": {"maxRetries": 2}}}')
    layer = SettingsLayer.from_file(path, pi=True)
    assert layer.values == {"retry.provider.maxRetries": 2}
    assert layer.warnings == (f"{MOOT_PROVIDER_RETRIES} (in {path})",)


@pytest.mark.parametrize(
    ("data", "key", "described"),
    [
        ({"steeringMode": "some"}, "steeringMode", 'one of "all", "one-at-a-time", not \'some\''),
        ({"defaultModel": 3}, "defaultModel", "a non-empty string, or null, not 3"),
        (
            {"compaction": {"reserveTokens": "big"}},
            "compaction.reserveTokens",
            "an integer from 0 to 10000000, not 'big'",
        ),
        (
            {"defaultThinkingLevel": "max"},
            "defaultThinkingLevel",
            'one of "off", "minimal", "low", "medium", "high", "xhigh", or null, not \'max\'',
        ),
    ],
)
def test_wrong_type_of_a_used_key_is_an_error(
    tmp_path: Path, data: dict[str, Any], key: str, described: str
) -> None:
    """A key we use with a wrong type stays a hard error naming file and key."""
    path = write(tmp_path / "settings.json", json.dumps(data))
    expected = f"{key} must be {described} (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$") as info:
        SettingsLayer.from_file(path, pi=True)
    assert (info.value.key, info.value.source) == (key, str(path))


# -- writing back ----------------------------------------------------------------------


def test_set_and_persist_writes_the_global_file_keeping_everything(tmp_path: Path) -> None:
    """A key in no file goes to the global file; pi's keys and unknown keys stay as they were."""
    directory = agent_dir(tmp_path)
    global_file = directory / "settings.json"
    data = {**PI_SETTINGS, "someoneElses": {"keep": [1, 2]}}
    write(global_file, json.dumps(data, indent=2))
    config = load_agent_dir(directory, cwd=tmp_path)
    warnings: list[str] = []
    store = load_settings([], agent_dir=config, warn=warnings.append)
    assert store.global_path == global_file
    assert warnings == [
        "trio-session: warning: someoneElses is not a known setting (known groups: "
        f"retry.*, compaction.*, credentials.*, http.*, rateLimit.*) (in {global_file}); ignored"
    ]
    assert store.set_and_persist("retry.enabled", False) == global_file
    written = json.loads(global_file.read_text())
    assert written == {**data, "retry": {**PI_SETTINGS["retry"], "enabled": False}}
    assert store.current.retry.enabled is False
    assert store.source_of("retry.enabled") is not None


def test_set_and_persist_creates_the_global_file(tmp_path: Path) -> None:
    """No global file yet: it is created with the one key; the project file is left alone."""
    global_file = tmp_path / "agent" / "settings.json"
    project = write(tmp_path / "p" / "settings.json", '{"retry": {"maxRetries": 1}}')
    store = SettingsStore.from_files(global_file, project, global_path=global_file)
    assert store.set_and_persist("compaction.enabled", False) == global_file
    assert json.loads(global_file.read_text()) == {"compaction": {"enabled": False}}
    assert json.loads(project.read_text()) == {"retry": {"maxRetries": 1}}
    # a key the project file sets is still written there
    assert store.set_and_persist("retry.maxRetries", 2) == project
    assert json.loads(project.read_text()) == {"retry": {"maxRetries": 2}}


# -- the real thing: pi's agent dir driving a real rpc process ------------------------------


def chunk(content: str | None = None, finish: str | None = None) -> str:
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


async def test_rpc_with_pi_agent_dir_end_to_end(tmp_path: Path, nursery: trio.Nursery) -> None:
    """rpc --agent-dir on pi's own files: the custom model answers over real HTTP with the
    auth.json key; set_auto_retry lands in pi's settings.json; pi's recommended
    retry.provider.maxRetries 0 draws no warning; no key is ever printed."""
    server = ScriptedServer()
    await nursery.start(server.run)
    reply = [chunk("Hello from local"), chunk(finish="stop"), "data: [DONE]\n\n"]
    server.script(event_stream(reply))
    directory = agent_dir(tmp_path, base_url=f"{server.url}/v1")
    settings = {**PI_SETTINGS, "retry": {**PI_SETTINGS["retry"], "provider": {"maxRetries": 0}}}
    write(directory / "settings.json", json.dumps(settings, indent=2))
    write(directory / "auth.json", json.dumps({"local": {"type": "api_key", "key": AUTH_SECRET}}))
    project = tmp_path / "project"
    write(project / ".pi" / "settings.json", '{"followUpMode": "all"}')
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_LLM_KEY"}
    with trio.fail_after(60):
        async with open_rpc_client(
            args=["--agent-dir", str(directory)], env=env, cwd=str(project)
        ) as client:
            with client.events() as events:
                await client.prompt("hi")
                end = await events.next("agent_end")
            state = await client.get_state()
            await client.set_auto_retry(False)
            stdout_state = await client.get_state()
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {AUTH_SECRET}"
    assert request.json()["model"] == "qwen-coder"
    assert end["messages"][-1]["content"][0]["text"] == "Hello from local"
    assert (state["model"]["provider"], state["model"]["id"]) == ("local", "qwen-coder")
    assert stdout_state["autoRetryEnabled"] is False
    written = json.loads((directory / "settings.json").read_text())
    assert written["retry"]["enabled"] is False
    assert {k: v for k, v in written.items() if k != "retry"} == {
        k: v for k, v in settings.items() if k != "retry"
    }
    assert written["retry"]["provider"] == {"maxRetries": 0}
    assert client.stderr == ""  # pi's recommended retry.provider.maxRetries 0: no warning
    assert AUTH_SECRET not in json.dumps([end, state, stdout_state])


async def run_trio_session(
    tmp_path: Path, *args: str, stdin: bytes = b"", **environ: str
) -> tuple[int, str, str]:
    """``python -m trio_session ARGS`` in ``tmp_path``: exit status, stdout, stderr."""
    done = await trio.run_process(
        [sys.executable, "-m", "trio_session", *args],
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, **environ},
        cwd=tmp_path,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_the_environment_variable_names_the_agent_dir(tmp_path: Path) -> None:
    """Without --agent-dir, $PI_CODING_AGENT_DIR is read: set_auto_retry lands in its settings."""
    directory = tmp_path / "agent"
    script = write(tmp_path / "script.json", "[]")
    command = b'{"id": "1", "type": "set_auto_retry", "enabled": false}\n'
    status, out, err = await run_trio_session(
        tmp_path, "rpc", "--faux", str(script), stdin=command, PI_CODING_AGENT_DIR=str(directory)
    )
    assert (status, err) == (0, "")
    assert json.loads(out)["success"] is True
    assert json.loads((directory / "settings.json").read_text()) == {"retry": {"enabled": False}}


async def test_a_model_of_an_api_we_do_not_speak_stops_the_command(tmp_path: Path) -> None:
    """--model local/codestral (mistral-conversations): exit 2, one line naming the api."""
    directory = agent_dir(tmp_path)
    status, out, err = await run_trio_session(
        tmp_path, "rpc", "--agent-dir", str(directory), "--model", "local/codestral"
    )
    assert (status, out) == (2, "")
    assert err == (
        "trio-session: model local/codestral uses the api 'mistral-conversations', which "
        "trio-session does not speak (it speaks openai-completions, anthropic-messages and "
        "google-generative-ai)\n"
    )


async def test_unknown_keys_warn_and_the_command_runs(tmp_path: Path) -> None:
    """An unknown key in a --settings file: a warning on stderr, and rpc serves as usual."""
    settings = write(tmp_path / "s.json", '{"retry": {"maxRetry": 1}, "myTool": true}')
    script = write(tmp_path / "script.json", "[]")
    command = b'{"id": "1", "type": "get_state"}\n'
    status, out, err = await run_trio_session(
        tmp_path, "rpc", "--faux", str(script), "--settings", str(settings), stdin=command
    )
    assert status == 0
    assert json.loads(out)["success"] is True
    assert err.splitlines() == [
        "trio-session: warning: retry.maxRetry is not a known setting (known retry keys: "
        "enabled, maxRetries, baseDelayMs, maxDelayMs, jitter, respectRetryAfter, classifier, "
        "profile, maxAgentDelayMs, sharedCooldown, maxTotalMs, provider.maxRetryDelayMs, "
        "provider.timeoutMs, provider.idleTimeoutMs, "
        f"provider.maxRetries) (in {settings}); ignored",
        "trio-session: warning: myTool is not a known setting (known groups: retry.*, "
        f"compaction.*, credentials.*, http.*, rateLimit.*) (in {settings}); ignored",
    ]
