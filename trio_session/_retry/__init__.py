"""The retry policy, in one folder: SPEC §1–§6 (docs/spec.md), rule by rule.

A reader who wants to know what happens to a failed request opens this folder. The
modules, lowest first (each imports only those above it in this list):

| module | what it is | imports |
|---|---|---|
| ``classify.py`` | which errors retry, which overflow, the server's wait hint | pure |
| ``backoff.py`` | the delay before a re-attempt; the one cap rule ``wait_cap`` | pure |
| ``decide.py`` | the one decision after a run, and the one maximum check | pure |
| ``chain.py`` | the retry chain: one task, one scope, one ``auto_retry_end`` | trio |
| ``keys.py`` | credentials: the key per request, rotation, shared cooldowns | the store |
| ``controller.py`` | the prompt's scope tree: run, settle, join, abort, succeed | the agent |

Where each rule lives (``file:function``):

| rule | what | where |
|---|---|---|
| R-1, R-2, R-3 | after each run: retry, compaction, or nothing | ``decide.py:decide`` |
| R-4, R-5, R-6 | retryable: error, pattern, not overflow | ``classify.py:PatternClassifier.is_retryable`` |
| R-7 | context overflow, by wording or silent | ``classify.py:PatternClassifier.is_context_overflow`` |
| R-8 | the strict classifier | ``classify.py:STRICT_CLASSIFIER`` |
| R-9 | ``retry_attempt`` | ``chain.py:RetryChain.attempt`` |
| R-10, R-14 | the chain is a task, made once | ``controller.py:PromptController._settle`` |
| R-11 | settings read fresh | ``decide.py:decide``, ``chain.py:RetryChain._start_attempt`` |
| R-12 | retry disabled: no chain, no event | ``decide.py:decide`` |
| R-13, R-15, R-27 | count, then the maximum (checked once) | ``decide.py:decide``, ``chain.py:RetryChain._start_attempt`` |
| R-15a | the last error stays when no retry starts | ``controller.py:PromptController._settle`` |
| R-16 | ``baseDelayMs * 2 ** (attempt - 1)`` | ``backoff.py:exponential_delay_ms`` |
| R-17 | usage limit: rotate the credential | ``chain.py:RetryChain._start_attempt``, ``keys.py:KeyRing.rotate`` |
| R-18 | retry hints | ``classify.py:parse_retry_after_ms`` |
| R-19 | ``auto_retry_start`` | ``chain.py:RetryChain._start_attempt`` |
| R-20, R-20a | drop the error from the runtime context | ``controller.py:PromptController.drop_from_context`` |
| R-21, R-22 | sleep, then continue | ``chain.py:RetryChain.run``, ``controller.py:PromptController.reattempt`` |
| R-23, R-23a | success, after its ``message_end`` | ``controller.py:PromptController.saw_message`` |
| R-24, R-25 | the chain's other ends | ``chain.py:RetryChain.run``, ``controller.py:PromptController._run_chain`` |
| R-26, R-28 | settings, cap, jitter, ``Retry-After`` | ``backoff.py:plan_delay``, ``backoff.py:wait_cap`` |
| R-28a | one owner of the loop (providers never retry) | this folder |
| R-28b | shared cooldown | ``keys.py:KeyRing.share_cooldown``, ``keys.py:KeyRing.cooldown_ms``, ``keys.py:KeyRing.api_key`` |
| R-29, R-31 | ``abort_retry()`` cancels the chain's scope | ``controller.py:PromptController.abort_retry``, ``chain.py:RetryChain.cancel`` |
| R-30, R-34 | a cancelled chain still ends, once | ``chain.py:RetryChain.run`` (its ``finally``) |
| R-32, R-33 | ``abort()``, a caller's timeout | ``controller.py:PromptController.abort``, ``controller.py:PromptController.run`` |
| R-34a | ``retry_now()``, a prompt joining the wait | ``chain.py:RetryChain.skip_wait``, ``controller.py:PromptController.join`` |
| R-35 | ``prompt()`` returns when the nursery closes | ``controller.py:PromptController.run`` |
| R-36 | one prompt at a time | ``controller.py:PromptController.refuse`` |
| R-36a | queues during a retry | ``controller.py:PromptController.end``, the agent's queues |

The scope tree of one prompt, as the code builds it (``controller.py:PromptController.run``):

```text
AgentSession.prompt() → PromptController.run()
└── nursery (cancel scope = the run)     abort() / the caller's timeout cancel it (R-32, R-33)
    ├── first run: agent.prompt()        the prompt's own task; decide() at its agent_end
    └── retry chain task                 exists ⇔ is_retrying (R-10)
        └── CancelScope (the chain)      abort_retry() cancels it (R-29, R-31)
            ├── sleep(delay)             retry_now() / a joining prompt end just this wait
            └── agent continue           the re-attempt, under the same scope
```

A 503 then a success, followed from ``AgentSession.prompt``:
``controller.py:PromptController.run`` → ``decide.py:decide`` (RETRY) →
``controller.py:PromptController._settle`` (starts the chain) →
``chain.py:RetryChain.run`` (``auto_retry_start``, sleep, ``reattempt``) →
``controller.py:PromptController.saw_message`` → ``chain.py:RetryChain.succeed``
(``auto_retry_end``).

This ``__init__`` imports nothing, so ``classify`` (which the providers use) costs no
more than itself.
"""
