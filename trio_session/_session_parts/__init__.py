"""The collaborators ``AgentSession`` is a facade over, one concern per module.

| module | holds |
|---|---|
| ``hub`` | the event hub: observer, subscribers, ``EventStream``s, extensions |
| ``journal`` | the history, the session file's writes, bash results held for a prompt |
| ``compaction`` | compaction, manual and on overflow |
| ``models`` | the session's model and thinking level (``ModelChoice``) |
| ``bash`` | the user's ``bash`` commands (``BashCommands``; each command a ``BashRun``) |

Each is made by ``AgentSession`` with what it needs; none reads the facade. The prompt
itself — its scope tree, the decision after each run, the retry chain — is
``trio_session._retry``. Nothing here imports ``trio_session._session``.
"""
