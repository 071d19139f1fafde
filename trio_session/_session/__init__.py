"""The session: ``AgentSession`` (``facade``), its collaborators, and opening one.

| module | holds |
|---|---|
| ``facade`` | ``AgentSession``: the public face, each member handing its work on |
| ``hub`` | the event hub: observer, subscribers, ``EventStream``s, extensions |
| ``journal`` | the history, the session file's writes, bash results held for a prompt |
| ``compaction`` | compaction, manual and on overflow |
| ``models`` | the session's model and thinking level (``ModelChoice``) |
| ``bash`` | the user's ``bash`` commands (``BashCommands``) |
| ``bash_run`` | one ``bash`` command (``BashRun``): its process group, its output |
| ``stream`` | ``session.stream()``: the reply as it comes |
| ``opening`` | ``open_session``: the block a session lives in |
| ``extension_runner``, ``extensions`` | extensions: their task, their API, loading them |

Each collaborator is made by ``AgentSession`` with what it needs; none reads the facade,
and none of them imports it. The prompt itself — its scope tree, the decision after each
run, the retry chain — is ``trio_session._retry``. This ``__init__`` imports nothing.
"""
