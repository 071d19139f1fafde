"""The collaborators ``AgentSession`` is a facade over, one concern per module.

| module | holds |
|---|---|
| ``hub`` | the event hub: observer, subscribers, ``EventStream``s, extensions |
| ``journal`` | the history, the session file's writes, bash results held for a prompt |
| ``compaction`` | compaction, manual and on overflow (``compact()`` is the facade's) |
| ``queues`` | steering and follow-up queues, their public face |
| ``models`` | models and thinking levels |
| ``bash`` | the public face of ``bash`` commands (the command is a ``BashRun``) |
| ``records`` | stats, export, the session's name and fork points |
| ``switches`` | auto-retry and auto-compaction on or off, the store's status |

The prompt itself — its scope tree, the decision after each run, the retry chain — is
``trio_session._retry``. Nothing here imports ``trio_session._session``.
"""
