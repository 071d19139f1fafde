"""Base URLs from the environment, the CLI's endpoint order, and built-in prices.

``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` / ``GEMINI_BASE_URL`` are the endpoint of a
provider made without ``base_url`` (as the vendors' SDKs read them); an explicit
argument wins. Requests really go to a loopback server the variable names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from trio_session import (
    AnthropicProvider,
    GeminiProvider,
    Model,
    ModelCost,
    OpenAIProvider,
    ProviderRequest,
    UserMessage,
    builtin_model,
    open_session,
)
from trio_session._commands import endpoint, open_provider, select_model
from trio_session._pi.config import load_agent_dir
from trio_session._settings.store import Settings

from .http_server import ScriptedServer, event_stream, sse
from .provider_support import RecordingSink

REQUEST_MESSAGES = (UserMessage("Hi", timestamp=0),)


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture(autouse=True)
def _no_base_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with none of the variables set, whatever the machine has."""
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def openai_answer(text: str) -> str:
    """One Chat Completions chunk with ``text`` and a finish reason."""
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": "stop"}
    return sse({"choices": [choice]})


def gemini_answer(text: str, **usage: int) -> str:
    """One Gemini chunk with ``text``, STOP and ``usageMetadata``."""
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
    return sse({"candidates": [candidate], "usageMetadata": usage})


async def test_openai_base_url_is_honoured(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acceptance: OpenAIProvider() sends to $OPENAI_BASE_URL; a base_url argument wins."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/proxy/v1/")
    server.script(event_stream([openai_answer("from env"), "data: [DONE]\n\n"]))
    async with OpenAIProvider(api_key="sk-test", timeout=5.0) as provider:
        assert provider.base_url == f"{server.url}/proxy/v1"
        assert not provider.base_url_is_default
        sink = RecordingSink()
        request = ProviderRequest(model=Model(id="gpt-x", provider="openai"), messages=())
        await provider.stream(request, sink)
    assert sink.joined == "from env"
    assert [r.path for r in server.requests] == ["/proxy/v1/chat/completions"]
    explicit = OpenAIProvider(base_url="http://127.0.0.1:9/v1")
    assert explicit.base_url == "http://127.0.0.1:9/v1"


async def test_anthropic_and_gemini_base_urls(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ANTHROPIC_BASE_URL and GEMINI_BASE_URL move their providers the same way."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("GEMINI_BASE_URL", f"{server.url}/v1beta")
    server.script(
        event_stream(['event: message_stop\ndata: {"type": "message_stop"}\n\n']),
        event_stream([gemini_answer("ok")]),
    )
    async with AnthropicProvider(timeout=5.0) as anthropic, GeminiProvider(timeout=5.0) as gemini:
        for provider, model in ((anthropic, "claude-x"), (gemini, "gemini-2.5-flash")):
            request = ProviderRequest(
                model=Model(id=model, provider=provider.name), messages=REQUEST_MESSAGES
            )
            end = await provider.stream(request, RecordingSink())
            assert end.stop_reason == "stop", end
    assert [r.path for r in server.requests] == [
        "/v1/messages",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    ]


def test_unset_or_blank_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blank variable is no variable: the provider's own endpoint."""
    monkeypatch.setenv("GEMINI_BASE_URL", "   ")
    assert GeminiProvider().base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert GeminiProvider().base_url_is_default
    assert OpenAIProvider().base_url == "https://api.openai.com/v1"
    assert AnthropicProvider().base_url == "https://api.anthropic.com"


def test_cli_endpoint_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--base-url, then a models.json baseUrl, then the variable, then the default."""
    openai = select_model(provider="openai", model_id=None, settings=Settings())
    assert endpoint(openai) == ("https://api.openai.com/v1", "default")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    assert endpoint(openai) == ("http://127.0.0.1:8080/v1", "OPENAI_BASE_URL")
    assert endpoint(openai, "http://127.0.0.1:9/v1") == ("http://127.0.0.1:9/v1", "--base-url")
    # pi's built-in openai at its default endpoint: the variable still moves it
    directory = tmp_path / "agent"
    directory.mkdir()
    config = load_agent_dir(directory, cwd=tmp_path)
    pi_openai = select_model(
        provider="openai", model_id="gpt-4.1", settings=Settings(), agent_dir=config
    )
    assert endpoint(pi_openai) == ("http://127.0.0.1:8080/v1", "OPENAI_BASE_URL")
    # a models.json baseUrl for the provider wins over the variable
    (directory / "models.json").write_text(
        json.dumps({"providers": {"openai": {"baseUrl": "http://127.0.0.1:7/v1"}}})
    )
    config = load_agent_dir(directory, cwd=tmp_path)
    moved = select_model(
        provider="openai", model_id="gpt-4.1", settings=Settings(), agent_dir=config
    )
    assert endpoint(moved) == ("http://127.0.0.1:7/v1", "the model's baseUrl")


async def test_open_provider_gemini_from_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's gemini: GeminiProvider at $GEMINI_BASE_URL, priced from the built-in table;
    a session's assistant message carries usage.cost."""
    monkeypatch.setenv("GEMINI_BASE_URL", f"{server.url}/v1beta")
    usage = {"promptTokenCount": 2_000_000, "candidatesTokenCount": 100_000}
    server.script(event_stream([gemini_answer("Hi!", **usage)]))
    async with open_provider("gemini") as (provider, model):
        assert isinstance(provider, GeminiProvider)
        assert (model.provider, model.id, model.base_url) == (
            "gemini",
            "gemini-2.5-flash",
            f"{server.url}/v1beta",
        )
        async with open_session(provider, model) as session:
            message = await session.prompt("hello")
    assert message.text == "Hi!"
    assert message.usage.input == 2_000_000
    # $0.30 per M input, $2.50 per M output
    assert message.usage.cost.input == pytest.approx(0.6)
    assert message.usage.cost.output == pytest.approx(0.25)
    assert message.usage.cost.total == pytest.approx(0.85)


def test_builtin_table() -> None:
    """The default model of each provider is priced; unknown ids are None; pi's "google"
    shares the Gemini table."""
    for provider, model_id in (
        ("openai", "gpt-4.1-mini"),
        ("anthropic", "claude-sonnet-4-5"),
        ("gemini", "gemini-2.5-flash"),
        ("gemini", "gemini-2.5-pro"),
        ("gemini", "gemini-2.0-flash"),
        ("google", "gemini-2.5-flash"),
    ):
        model = builtin_model(provider, model_id)
        assert model is not None, model_id
        assert model.provider == provider
        assert model.cost.input > 0
        assert model.cost.output > 0
        assert model.context_window >= 128_000
    assert builtin_model("openai", "no-such-model") is None
    assert builtin_model("faux", "gpt-4.1") is None
    sonnet = builtin_model("anthropic", "claude-sonnet-4-5")
    assert sonnet is not None
    assert sonnet.cost == ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def test_select_model_prices_and_models_json_overrides(tmp_path: Path) -> None:
    """Without pi's dir the built-in prices apply; with it, modelOverrides' cost wins,
    field by field over the table."""
    plain = select_model(provider="openai", model_id=None, settings=Settings())
    assert plain.cost == ModelCost(input=0.4, output=1.6, cache_read=0.1)
    assert plain.context_window == 1_047_576
    directory = tmp_path / "agent"
    directory.mkdir()
    overrides = {
        "modelOverrides": {
            "gpt-4.1-mini": {
                "cost": {"input": 9.0, "output": 9.5, "cacheRead": 0.0, "cacheWrite": 0.0}
            }
        }
    }
    (directory / "models.json").write_text(json.dumps({"providers": {"openai": overrides}}))
    config = load_agent_dir(directory, cwd=tmp_path)
    over = select_model(provider="openai", model_id=None, settings=Settings(), agent_dir=config)
    assert over.cost == ModelCost(input=9.0, output=9.5, cache_read=0.0, cache_write=0.0)
    assert over.context_window == 1_047_576  # not overridden: the table's
    google = select_model(
        provider="google", model_id="gemini-2.5-pro", settings=Settings(), agent_dir=config
    )
    assert (google.api, google.cost.input) == ("google-generative-ai", 1.25)
    ours = select_model(provider="gemini", model_id=None, settings=Settings(), agent_dir=config)
    assert (ours.provider, ours.id, ours.cost.output) == ("gemini", "gemini-2.5-flash", 2.5)
