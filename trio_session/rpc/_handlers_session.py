"""RPC handlers of the session's settings, queues, models, thinking, stats, bash and info.

(``compact`` runs in a task, as ``prompt`` does: it is the server's, ``_server``.)

Each is a function of the server (a ``Host``) and its command, declared once in
``HANDLERS`` at the end; the shapes are the reference's.
"""

from __future__ import annotations

from typing import Final

from .._core.codec import message_to_json, model_to_json
from ._host import QUEUED, Handlers, Host, null
from ._protocol import (
    AbortBash,
    Bash,
    ClearQueue,
    CycleModel,
    CycleThinkingLevel,
    ExportHtml,
    FollowUp,
    GetAvailableModels,
    GetAvailableThinkingLevels,
    GetCommands,
    GetLastAssistantText,
    GetMessages,
    GetSessionStats,
    GetState,
    Response,
    RetryNow,
    SetAutoCompaction,
    SetAutoRetry,
    SetFollowUpMode,
    SetModel,
    SetSteeringMode,
    SetThinkingLevel,
    Steer,
)

# -- state and settings --


async def _retry_now(host: Host, command: RetryNow) -> Response:
    return Response.ok(command, {"skipped": host.session.retry_now()})


async def _set_auto_retry(host: Host, command: SetAutoRetry) -> Response:
    host.session.set_auto_retry_enabled(command.enabled)
    return Response.ok(command)


async def _set_auto_compaction(host: Host, command: SetAutoCompaction) -> Response:
    host.session.set_auto_compaction_enabled(command.enabled)
    return Response.ok(command)


async def _get_state(host: Host, command: GetState) -> Response:
    return Response.ok(command, host.state())


async def _get_messages(host: Host, command: GetMessages) -> Response:
    return Response.ok(command, {"messages": [message_to_json(m) for m in host.session.messages]})


# -- models and thinking --


async def _get_available_models(host: Host, command: GetAvailableModels) -> Response:
    models = [model_to_json(m) for m in host.session.available_models]
    return Response.ok(command, {"models": models})


async def _set_model(host: Host, command: SetModel) -> Response:
    session = host.session
    found = next(
        (
            m
            for m in session.available_models
            if m.provider == command.provider and m.id == command.model_id
        ),
        None,
    )
    if found is None:
        return Response.failed(command, f"Model not found: {command.provider}/{command.model_id}")
    await session.set_model(found)
    return Response.ok(command, model_to_json(found))


async def _cycle_model(host: Host, command: CycleModel) -> Response:
    session = host.session
    model = await session.cycle_model()
    if model is None:
        return null(command)
    data = {
        "model": model_to_json(model),
        "thinkingLevel": session.thinking_level,
        "isScoped": False,
    }
    return Response.ok(command, data)


async def _set_thinking_level(host: Host, command: SetThinkingLevel) -> Response:
    host.session.set_thinking_level(command.level)
    return Response.ok(command)


async def _cycle_thinking_level(host: Host, command: CycleThinkingLevel) -> Response:
    level = host.session.cycle_thinking_level()
    return null(command) if level is None else Response.ok(command, {"level": level})


async def _get_available_thinking_levels(
    host: Host, command: GetAvailableThinkingLevels
) -> Response:
    return Response.ok(command, {"levels": list(host.session.available_thinking_levels)})


# -- stats, bash and info --


async def _get_session_stats(host: Host, command: GetSessionStats) -> Response:
    return Response.ok(command, host.session.stats().to_json())


async def _get_last_assistant_text(host: Host, command: GetLastAssistantText) -> Response:
    text = host.session.last_assistant_text()  # none: pi writes {} (its docs say null)
    return Response.ok(command, {} if text is None else {"text": text})


async def _bash(host: Host, command: Bash) -> Response | None:
    return await host.bash.start(host.session, command)  # None: its task answers it


async def _abort_bash(host: Host, command: AbortBash) -> Response:
    host.session.abort_bash()
    return Response.ok(command)


async def _export_html(host: Host, command: ExportHtml) -> Response:
    try:
        path = await host.session.export_html(command.output_path)
    except OSError as exc:  # a path that cannot be written: the client's to fix
        return Response.failed(command, f"cannot write the HTML file: {exc}")
    return Response.ok(command, {"path": str(path)})


async def _get_commands(host: Host, command: GetCommands) -> Response:
    return Response.ok(command, {"commands": host.prompt_input.commands()})


# -- queues and compaction --


async def _steer(host: Host, command: Steer) -> Response:
    host.session.steer(host.prompt_input.expand(command.message), command.images)
    return Response.ok(command, QUEUED)


async def _follow_up(host: Host, command: FollowUp) -> Response:
    host.session.follow_up(host.prompt_input.expand(command.message), command.images)
    return Response.ok(command, QUEUED)


async def _set_steering_mode(host: Host, command: SetSteeringMode) -> Response:
    host.session.set_steering_mode(command.mode)
    return Response.ok(command)


async def _set_follow_up_mode(host: Host, command: SetFollowUpMode) -> Response:
    host.session.set_follow_up_mode(command.mode)
    return Response.ok(command)


async def _clear_queue(host: Host, command: ClearQueue) -> Response:
    steering, follow_up = host.session.clear_queue()
    return Response.ok(command, {"steering": list(steering), "followUp": list(follow_up)})


#: Each command of this module → its handler.
HANDLERS: Final[Handlers] = {
    RetryNow: _retry_now,
    SetAutoRetry: _set_auto_retry,
    SetAutoCompaction: _set_auto_compaction,
    GetState: _get_state,
    GetMessages: _get_messages,
    GetAvailableModels: _get_available_models,
    SetModel: _set_model,
    CycleModel: _cycle_model,
    SetThinkingLevel: _set_thinking_level,
    CycleThinkingLevel: _cycle_thinking_level,
    GetAvailableThinkingLevels: _get_available_thinking_levels,
    GetSessionStats: _get_session_stats,
    GetLastAssistantText: _get_last_assistant_text,
    Bash: _bash,
    AbortBash: _abort_bash,
    ExportHtml: _export_html,
    GetCommands: _get_commands,
    Steer: _steer,
    FollowUp: _follow_up,
    SetSteeringMode: _set_steering_mode,
    SetFollowUpMode: _set_follow_up_mode,
    ClearQueue: _clear_queue,
}
