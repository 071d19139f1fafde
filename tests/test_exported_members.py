"""The public surface, pinned: ``AgentSession``'s members beside ``__all__``'s names.

Moving code between the facade and its collaborators must not add, drop or rename a
public member; this list changes only on purpose (and then the changelog says so).
"""

from __future__ import annotations

import trio

import trio_session
from trio_session import AgentSession, FauxProvider, FauxReply, open_session

#: Every public member of ``AgentSession``, inherited ones included.
AGENT_SESSION_MEMBERS = [
    "abort",
    "abort_bash",
    "abort_retry",
    "aclose",
    "assert_idle",
    "auto_compaction_enabled",
    "auto_retry_enabled",
    "available_models",
    "available_thinking_levels",
    "bash",
    "busy_with",
    "clear_queue",
    "compact",
    "credential_store_status",
    "cycle_model",
    "cycle_thinking_level",
    "events",
    "export_html",
    "follow_up",
    "follow_up_messages",
    "follow_up_mode",
    "fork_messages",
    "history",
    "history_file",
    "is_bash_running",
    "is_compacting",
    "is_rate_limited",
    "is_retrying",
    "is_running",
    "is_waiting_to_retry",
    "join_retry",
    "last_assistant_text",
    "messages",
    "model",
    "pending_message_count",
    "prompt",
    "retry_attempt",
    "retry_now",
    "session_file",
    "session_id",
    "session_name",
    "set_auto_compaction_enabled",
    "set_auto_retry_enabled",
    "set_follow_up_mode",
    "set_model",
    "set_session_name",
    "set_steering_mode",
    "set_thinking_level",
    "settings",
    "settings_store",
    "stats",
    "steer",
    "steering_messages",
    "steering_mode",
    "stream",
    "subscribe",
    "thinking_level",
    "wait_for_retry_end",
]


def test_agent_session_members() -> None:
    """``AgentSession`` has exactly the pinned public members."""
    members = sorted(name for name in dir(AgentSession) if not name.startswith("_"))
    assert members == AGENT_SESSION_MEMBERS


def test_all_count() -> None:
    """``trio_session.__all__``: its 140 names (issue 26 moved none); issue 28's four
    pi 1.6.0 events (summarization_retry_*, entry_appended) and seven classifier tables
    and classifiers; issue 31's ``ReplyItems``, ``ReplyRestart``, ``SERVICE_SETTINGS``,
    ``ProviderFailure``, ``ModelFallback`` (the fallback models' event), and 7 classes
    public signatures named without exporting them (``ImageContent``, ``Cost``, four
    message classes, ``CredentialInfo``); issue 27's ``AgentSettled``; ``HttpSettings``
    (the ``http`` group of ``Settings``); issue 42's ``ToolError``, ``ToolOutput``,
    ``ToolExecutionUpdate`` and ``coding_tools``; issue 45's ``settings_with``; issue 43's
    ``RateLimitSettings``, ``RateLimits`` (the ``rateLimit`` group) and its two wait
    events."""
    assert len(trio_session.__all__) == 174


async def test_repr_is_short_and_constant_in_size() -> None:
    """``repr(session)`` is a few fields: the same length after ten prompts as after one
    (it was every field, 5.5 KB after one prompt)."""
    replies = [FauxReply(text="hi " * 200) for _ in range(11)]
    async with open_session(FauxProvider(replies), session_id="s" * 64) as session:
        await session.prompt("hello")
        first = repr(session)
        for _ in range(10):
            await session.prompt("again " * 100)
        await trio.lowlevel.checkpoint()
        later = repr(session)
    assert first.startswith("<AgentSession 'ssssssssssss' faux/faux-model running=False")
    assert len(first) < 200
    assert abs(len(later) - len(first)) <= 1  # the message count gains a digit
