"""The collaborators ``AgentSession`` is a facade over, one concern per module.

| module | holds |
|---|---|
| ``hub`` | the event hub: observer, subscribers, ``EventStream``s, extensions |
| ``journal`` | the history (messages and the session file's writes) |
| ``compaction`` | compaction, manual and on overflow, and its public face |
| ``queues`` | steering and follow-up queues, their public face |
| ``models`` | models and thinking levels |
| ``bash`` | ``bash`` commands and the results that wait for a prompt's end |
| ``records`` | stats, export, the session's name and fork points |

The prompt itself — its scope tree, the decision after each run, the retry chain — is
``trio_session._retry``. Nothing here imports ``trio_session._session``.
"""
