"""Shared helpers: scripts, invariants, and a look at the task tree."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase

from trio_session import AgentSession, AutoRetryEnd, AutoRetryStart, FauxReply, SessionEvent

#: Where hypothesis keeps the examples that failed, so the next run tries them first:
#: ``.hypothesis/`` at the top of the repository (git ignores it), whatever directory
#: pytest runs in, and in CI too (hypothesis's own CI profile keeps none).
EXAMPLES = Path(__file__).resolve().parent.parent / ".hypothesis" / "examples"

# A loaded machine can stall any example for longer than hypothesis's default 200 ms
# deadline, failing a test with no defect: no example in this suite has a deadline.
# Loaded here, before any test module is imported, so every @settings inherits it.
settings.register_profile(
    "trio_session", deadline=None, database=DirectoryBasedExampleDatabase(EXAMPLES)
)
settings.load_profile("trio_session")

ERR_503 = "503 Service Unavailable"
ERR_400 = "400 Bad Request: invalid 'messages' field"
ERR_OVERFLOW = "400 prompt is too long: 213462 tokens > 200000 maximum"


def err(text: str = ERR_503, **kwargs: Any) -> FauxReply:
    """A scripted error reply."""
    return FauxReply(error=text, **kwargs)


def ok(text: str = "Hello", **kwargs: Any) -> FauxReply:
    """A scripted successful reply."""
    return FauxReply(text=text, **kwargs)


def hang() -> FauxReply:
    """A reply that streams one chunk and then never finishes."""
    return FauxReply(text="partial", hang=True)


def retry_settings(**retry: Any) -> dict[str, Any]:
    """Settings in file form with only the ``retry`` group given."""
    return {"retry": retry}


#: The retry profiles (R-53): a rule that holds in both is tested in both.
PROFILES = pytest.mark.parametrize("profile", ["seed", "pi-1.6"])


def in_profile(profile: str, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """``settings`` (file form) with ``retry.profile`` set to ``profile``."""
    settings = dict(settings or {})
    settings["retry"] = {**settings.get("retry", {}), "profile": profile}
    return settings


def check_retry_events(events: Sequence[SessionEvent]) -> int:
    """Every ``auto_retry_start`` is followed by exactly one ``auto_retry_end`` of its
    chain, and a chain never stays open. Returns the number of chains."""
    chains = 0
    open_chain = False
    for event in events:
        if isinstance(event, AutoRetryStart):
            if not open_chain:
                chains += 1
            open_chain = True
        elif isinstance(event, AutoRetryEnd):
            if not open_chain:  # maxRetries == 0: a chain that ends before any start
                chains += 1
            open_chain = False
    assert not open_chain, "a retry chain never ended"
    return chains


def _walk(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    yield task
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from _walk(child)


#: Tasks that live as long as the session itself, not as long as a prompt.
SERVICE_TASKS = {"trio_session._session.extension_runner.ExtensionRunner.run"}


def session_tasks() -> list[str]:
    """Names of live prompt-scoped tasks running trio_session code (none when idle)."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    return [t.name for t in _walk(root) if "trio_session" in t.name and t.name not in SERVICE_TASKS]


def assert_idle(session: AgentSession) -> None:
    """The session holds no retry state and runs no task of its own."""
    assert not session.is_running
    assert not session.is_retrying
    assert session.retry_attempt == 0
    assert session_tasks() == []


@pytest.fixture(autouse=True)
def _private_config_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads or writes the user's own files: the XDG directories point into a
    temporary directory (child processes inherit it), and pi's agent directory is unset.

    ``set_auto_retry`` writes the global settings file even when no file set the key,
    so without this a test could change the real ``~/.config/trio-session``.
    """
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)


#: The proxy variables httpx (and the providers) read; see ``_no_proxy_variables``.
PROXY_VARIABLES = tuple(
    name
    for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
    for name in (base, base.lower())
)


@pytest.fixture(autouse=True)
def _no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's loopback servers are reached directly on a machine with a proxy set:
    the proxy variables are unset for every test (and its child processes). The proxy
    tests give theirs in the environment they build."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# -- the `slow` marker ----------------------------------------------------------------------
# `pytest -m "not slow"` is the quick run for a newcomer; plain `pytest` (CI) runs all.
# Slow: the end-to-end tests — real processes of the package driven from outside, tmux,
# Chromium, pi on node, redis-server being killed, package builds, kill soaks — and the
# few other tests that take seconds each. tests/test_slow_marker.py checks every name here.

#: Test modules (paths under tests/) that are end-to-end as a whole.
SLOW_MODULES = frozenset(
    {
        "interop/",  # pi 0.73.1 on node
        "test_cli.py",  # the trio-session command: a process (or two) per test
        "test_cli_pi_flags.py",  # pi's flags, a process per test
        "test_cli_preflight.py",  # the same, against a loopback server
        "test_docs_site.py",  # the built site in headless Chromium
        "test_durability_cli.py",  # the chat process under signals and limits, in tmux
        "test_fleet_cli.py",  # CLI processes sharing a redis-server
        "test_hostile_paths.py",  # rpc and chat processes handed FIFOs, /dev/zero, …
        "test_kill_soak.py",
        "test_packaging.py",  # builds the sdist and wheel
        "test_redis_faults.py",  # redis-server killed, frozen, restarted
        "test_rpc_process.py",  # the rpc scenarios through a real process
        "test_rpc_sequences.py",  # fuzzed command sequences, a minute and 20 s
        "test_service_example.py",  # 130 websocket clients against the example service
        "test_session_file_creation.py",  # rpc and chat processes sharing session files
        "test_tui_chat_tmux.py",
        "test_tui_tmux.py",
        "test_type_completeness.py",  # pyright on node
    }
)

#: Single tests (every parametrization) that take seconds, by module.
SLOW_TESTS = {
    "test_conformance.py": frozenset(
        {
            "test_a_broken_agent_fails_on_its_rule",
            "test_a_drop_end_agent_in_the_table_names_the_rules",
            "test_an_agent_that_will_not_exit_is_killed_and_noted",
            "test_a_silent_agent_is_reported_after_one_response_timeout",
            "test_our_rpc_passes_every_row",
        }
    ),
    "test_cli_coding.py": frozenset(
        {"test_print_mode_runs_the_tools", "test_rpc_takes_the_tool_flags"}
    ),
    "test_credential_contract.py": frozenset({"test_rotation_is_atomic_across_processes"}),
    "test_deep_sessions.py": frozenset(
        {
            "test_get_tree_of_a_100_000_entry_session_over_rpc",
            "test_rpc_client_reads_a_10_000_deep_branch",
            "test_library_walks_a_10_000_deep_branch",
        }
    ),
    "test_docs_hooks.py": frozenset({"test_the_built_site_links_every_rule_id"}),
    "test_rate_budget_redis.py": frozenset(
        {"test_worker_processes_never_take_more_than_the_budget"}
    ),
    "test_rpc_fuzz.py": frozenset({"test_fuzz_real_process"}),
    "test_shared_cooldown.py": frozenset({"test_redis_shares_the_cooldown_between_workers"}),
    "test_startup_inputs.py": frozenset({"test_the_issue_credentials_line_in_a_real_process"}),
}

_TESTS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of ``SLOW_MODULES`` and ``SLOW_TESTS`` ``slow``."""
    for item in items:
        path = item.path.resolve()
        if not path.is_relative_to(_TESTS_DIR):
            continue
        where = path.relative_to(_TESTS_DIR).as_posix()
        name = getattr(item, "originalname", item.name)
        slow = any(where == m or (m.endswith("/") and where.startswith(m)) for m in SLOW_MODULES)
        if slow or name in SLOW_TESTS.get(where, ()):
            item.add_marker(pytest.mark.slow)
