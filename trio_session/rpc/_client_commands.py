"""The RPC client's command methods beyond the run's own, grouped by concern.

``RpcClient`` inherits them: each sends one command with ``request`` and returns the
part of its answer a caller wants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

JSONObject = dict[str, Any]


def disposition(response: JSONObject) -> str | None:
    """A prompt's, steer's or follow-up's ``data.disposition`` (R-54), if the server sent one."""
    data = response.get("data")
    value = data.get("disposition") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


class SessionCommands:
    """The model, thinking, stats, bash, info, queue, compaction and session-tree commands."""

    async def request(self, command: str, /, **fields: Any) -> JSONObject:
        """Send ``{"type": command, **fields}`` and return the server's response object.

        Args:
            command: the command's ``type``.
            **fields: the command's other fields.

        Returns:
            The response object.
        """
        raise NotImplementedError  # pragma: no cover - RpcClient's

    # -- models, thinking, stats, bash and info ---------------------------------

    async def get_available_models(self) -> list[JSONObject]:
        """The models the session can switch to, as the reference's Model objects."""
        models: list[JSONObject] = (await self.request("get_available_models"))["data"]["models"]
        return models

    async def set_model(self, provider: str, model_id: str) -> JSONObject:
        """Switch to ``provider``/``model_id``; returns its Model object.

        Args:
            provider: the model's provider name.
            model_id: the model's id.

        Raises:
            RpcCommandError: ``"Model not found: provider/id"``.
        """
        data: JSONObject = (await self.request("set_model", provider=provider, modelId=model_id))[
            "data"
        ]
        return data

    async def cycle_model(self) -> JSONObject | None:
        """Switch to the next model: ``{model, thinkingLevel, isScoped}``; ``None`` if only one."""
        data: JSONObject | None = (await self.request("cycle_model")).get("data")
        return data

    async def set_thinking_level(self, level: str) -> None:
        """Set the thinking level (``"off"`` … ``"xhigh"``; clamped to the model).

        Args:
            level: one of ``THINKING_LEVELS``.
        """
        await self.request("set_thinking_level", level=level)

    async def cycle_thinking_level(self) -> JSONObject | None:
        """Move to the next thinking level: ``{"level": …}``; ``None`` without reasoning."""
        data: JSONObject | None = (await self.request("cycle_thinking_level")).get("data")
        return data

    async def get_session_stats(self) -> JSONObject:
        """Message counts, token totals, cost and ``contextUsage``."""
        data: JSONObject = (await self.request("get_session_stats"))["data"]
        return data

    async def get_last_assistant_text(self) -> str | None:
        """The last assistant message's text, trimmed; ``None`` if there is none."""
        text: str | None = (await self.request("get_last_assistant_text"))["data"].get("text")
        return text

    async def bash(self, command: str) -> JSONObject:
        """Run a shell command on the server; ``{output, exitCode?, cancelled, truncated,
        fullOutputPath?}`` once it is over (``abort_bash`` from another task stops it).

        Args:
            command: the command line, run by the server's shell.
        """
        data: JSONObject = (await self.request("bash", command=command))["data"]
        return data

    async def abort_bash(self) -> None:
        """Stop the running bash command, if any."""
        await self.request("abort_bash")

    async def export_html(self, output_path: str | None = None) -> str:
        """Export the session as an HTML file; returns its path.

        Args:
            output_path: where to write the file; the server picks a name if omitted.
        """
        fields = {} if output_path is None else {"outputPath": output_path}
        path: str = (await self.request("export_html", **fields))["data"]["path"]
        return path

    async def get_commands(self) -> list[JSONObject]:
        """Commands that can be invoked with ``/name`` in a prompt."""
        commands: list[JSONObject] = (await self.request("get_commands"))["data"]["commands"]
        return commands

    # -- queues and compaction --

    async def steer(self, message: str, *, images: Sequence[Mapping[str, str]] = ()) -> str | None:
        """Queue a steering message (delivered after the current turn).

        Args:
            message: the message's text.
            images: image objects sent after the text.

        Returns:
            The server's ``disposition`` (``"queued"``), or ``None`` if it sends none.
        """
        fields: dict[str, Any] = {"message": message}
        if images:
            fields["images"] = [dict(image) for image in images]
        return disposition(await self.request("steer", **fields))

    async def follow_up(
        self, message: str, *, images: Sequence[Mapping[str, str]] = ()
    ) -> str | None:
        """Queue a follow-up message (delivered when the run would stop).

        Args:
            message: the message's text.
            images: image objects sent after the text.

        Returns:
            The server's ``disposition`` (``"queued"``), or ``None`` if it sends none.
        """
        fields: dict[str, Any] = {"message": message}
        if images:
            fields["images"] = [dict(image) for image in images]
        return disposition(await self.request("follow_up", **fields))

    async def set_steering_mode(self, mode: str) -> None:
        """``"all"`` or ``"one-at-a-time"``.

        Args:
            mode: ``"all"`` or ``"one-at-a-time"``.
        """
        await self.request("set_steering_mode", mode=mode)

    async def set_follow_up_mode(self, mode: str) -> None:
        """``"all"`` or ``"one-at-a-time"``.

        Args:
            mode: ``"all"`` or ``"one-at-a-time"``.
        """
        await self.request("set_follow_up_mode", mode=mode)

    async def compact(self, custom_instructions: str | None = None) -> JSONObject:
        """Compact now; returns ``{summary, firstKeptEntryId?, tokensBefore, …}``.

        Args:
            custom_instructions: what the summary should focus on.
        """
        fields: dict[str, Any] = {}
        if custom_instructions is not None:
            fields["customInstructions"] = custom_instructions
        data: JSONObject = (await self.request("compact", **fields))["data"]
        return data

    # -- session tree ------------------------------------------------------------

    async def switch_session(self, session_path: str) -> JSONObject:
        """Abort any run and resume that session file; returns ``{"cancelled": false}``.

        Args:
            session_path: the session file to resume.
        """
        data: JSONObject = (await self.request("switch_session", sessionPath=session_path))["data"]
        return data

    async def fork(self, entry_id: str) -> JSONObject:
        """A new session holding the branch before that user message; the server switches to it.

        Returns ``{"text": <the message's text>, "cancelled": false}``.

        Args:
            entry_id: the user message's entry id (from ``get_fork_messages``).
        """
        data: JSONObject = (await self.request("fork", entryId=entry_id))["data"]
        return data

    async def clone(self) -> JSONObject:
        """A new session holding the whole current branch; returns ``{"cancelled": false}``."""
        data: JSONObject = (await self.request("clone"))["data"]
        return data

    async def get_fork_messages(self) -> list[JSONObject]:
        """The user messages a fork can start before: ``[{"entryId", "text"}, …]``."""
        messages: list[JSONObject] = (await self.request("get_fork_messages"))["data"]["messages"]
        return messages

    async def set_session_name(self, name: str) -> None:
        """Set the session's display name (``get_state``'s ``sessionName``).

        Args:
            name: the new name (not empty).
        """
        await self.request("set_session_name", name=name)
