"""The retry policy, in one folder: SPEC §1–§6 and §12 (docs/spec.md), rule by rule.

A reader who wants to know what happens to a failed request opens this folder. The
modules, lowest first (each imports only those above it in this list):

```text
tables.py       the classifier tables: each profile's named patterns         pure
reply.py        the rules on a failed reply (FailedReply), its ProviderError  pure
classify.py     which errors retry, which overflow, the server's wait hint   pure
profile.py      the one reader of retry.profile; the one classifier choice   pure
backoff.py      the one delay function, every cap, and the one stop rule     pure
decide.py       the one decision after a run                                 pure
overflow.py     the overflow path's rules per profile, on decide's answer     pure
policy.py       RetryPolicy: the rules above bound to the settings in effect  pure
chain.py        the retry chain: one task, a scope per phase, one end       trio
summary.py      a compaction's summary request retried (pi-1.6)             trio
keys.py         credentials: the key per request, rotation, cooldowns        the store
fallback.py     fallback models: the next model, for one prompt             the agent
needs.py        what the controller needs of the session, as Protocols      —
run.py          PromptRun: one prompt as one loop; the chain's host           the agent
controller.py   the session's prompts: the one running, abort, join          the agent
```

Every decision asks one ``policy.py:RetryPolicy``, resolved from the settings at the
decision (R-11): the run's end (``PromptRun.decide``), the chain before each
wait (``RetryChain._start_attempt``), a summary request (``summary.py:RetryingAsk``),
the tracer's failure label (``_observe/tracing.py:classify_for``). Each rule has one home:

```text
the classifier in effect      profile.py:classifier_of    (R-8, R-53, R-57)
retry.profile, read           profile.py:retry_profile    (R-53; is_pi16 asks it)
the stop rule: max + budget   backoff.py:stop             (R-13, R-15, R-27, R-61)
the delay, every cap          backoff.py:plan_delay       (R-16, R-26, R-28, R-53a)
                              backoff.py:summary_delay_ms (R-56f: pi 1.6.0's own cap)
```

```

Where each rule of SPEC §1–§6 and §12 lives (``file:function``):

```text
R-1 R-2 R-3     decide.py:decide
R-4 R-5 R-6     classify.py:PatternClassifier.is_retryable (reply.py:PatternRules._retryable)
R-7             classify.py:PatternClassifier.is_context_overflow
                (reply.py:PatternRules._overflow_of)
R-8             classify.py:STRICT_CLASSIFIER
R-57            tables.py (SEED_PATTERNS, PI_1_6_PATTERNS, STRICT_PATTERNS),
                profile.py:classifier_of, PatternClassifier.from_table
R-58            tables.py:PI_1_6_PATTERNS, classify.py:PI_1_6_CLASSIFIER
R-59            tables.py:SEED_PATTERNS (R-5, R-7 as written, not 0.73.1's code)
R-60            tables.py:STRICT_PATTERNS, classify.py:STRICT_CLASSIFIER
R-9             chain.py:RetryChain.attempt
R-10 R-14       run.py:PromptRun.settle
R-11            decide.py:decide, chain.py:RetryChain._start_attempt
R-12            decide.py:decide
R-13 R-15 R-27  backoff.py:stop (the one stop rule), asked by decide.py:decide
                chain.py:RetryChain._start_attempt (count; end on GIVE_UP)
R-15a           run.py:PromptRun.settle
R-16            backoff.py:exponential_delay_ms
R-17            chain.py:RetryChain._start_attempt, keys.py:KeyRing.rotate
R-18            reply.py:parse_retry_after_ms (classify.py re-exports it)
R-19            chain.py:RetryChain._start_attempt
R-20 R-20a      chain.py:RetryChain.run, run.py:PromptRun.drop_from_context
R-21            chain.py:RetryChain.run
R-22            chain.py:RetryChain.run, run.py:PromptRun.reattempt
R-23 R-23a      chain.py:RetryChain.run (after the re-attempt's first answer)
R-24 R-25       chain.py:RetryChain.run, run.py:PromptRun.run_chain
R-26 R-28       backoff.py:plan_delay, backoff.py:wait_cap (the one cap rule)
R-28a           this folder: the one owner of the loop
R-61            backoff.py:stop, backoff.py:over_budget, chain.py:RetryChain._start_attempt
R-62            trio_session._settings.values.SERVICE_SETTINGS (the preset is settings)
R-63            chain.py:RetryChain.retrying, run.py:PromptRun.reattempt (passes it
                to Agent.start_run), _core/messages.py:AssistantMessage.raise_for_error
R-64            trio_session._core.failure (ProviderFailure), providers/_http_body.py:
                error_response_end; the codec skips both (IN_MEMORY)
R-28b           keys.py:KeyRing.share_cooldown, KeyRing.cooldown_ms, KeyRing.api_key
R-29 R-31       chain.py:RetryChain.cancel (AgentSession.abort_retry calls it;
                controller.py:PromptController.abort_retry for abort)
R-30 R-34       chain.py:RetryChain.run (its finally)
R-32 R-33       controller.py:PromptController.abort, run.py:PromptRun.run
R-34a           chain.py:RetryChain.skip_wait, controller.py:PromptController.join
R-35            run.py:PromptRun.run
R-36            controller.py:PromptController.refuse
R-36a           controller.py:PromptController.end
R-53            profile.py:retry_profile (the one reader of retry.profile),
                profile.py:classifier_of (the one choice of a classifier),
                policy.py:RetryPolicy.resolve (the one value every decision asks)
R-53a           backoff.py:agent_delay_cap, backoff.py:plan_delay
R-53b R-56      decide.py:asks_for_a_key, decide.py:decide (rotated),
                run.py:PromptRun.ask_store
R-56 R-56a-d    overflow.py:overflow_step, via policy.py:RetryPolicy.decide
R-56c           run.py:PromptRun.settle (the "recovery failed" end)
R-56e           run.py:PromptRun.drop_from_context
R-56f           summary.py:RetryingAsk, policy.py:RetryPolicy.retries_summary,
                backoff.py:summary_delay_ms
R-65            run.py:PromptRun.decide (willRetry, no_key_left),
                PromptRun.run_chain (a chain gave up: chain.py:RetryChain.gave_up),
                PromptRun._fall_back; fallback.py:Fallbacks.switch
R-66            fallback.py:Fallbacks.restore, via controller.py:PromptController.end
R-67            run.py:PromptRun.settle (in the prompt's nursery)
```

The scope tree of one prompt, as ``run.py:PromptRun.run`` builds it:

```text
AgentSession.prompt() → PromptRun.run()            returns when the prompt is over (R-35)
├── CancelScope (the run)              abort() / the caller's timeout cancel it (R-32, R-33)
│   └── first run: agent.start_run()   driven turn by turn; decide() at its end says what
│                                      follows, and its agent_end says so (R-45a)
└── nursery (the run from here on)     opened only if a chain, compaction or fallback follows;
    │                                  born cancelled if abort() came as the first run ended
    ├── compaction, then one run       (R-50), in the prompt's own task
    ├── a fallback model's run         (R-65) where the decision was made: the prompt's
    │                                  task, or the chain's task once the chain has ended
    └── retry chain task               exists ⇔ is_retrying (R-10); a scope per phase,
        │                              each cancelled by abort_retry() (R-29, R-31)
        ├── CancelScope (the wait)     its deadline is the delay's end; retry_now() / a
        │   └── sleep(delay)           joining prompt end it early (R-34a)
        └── CancelScope (the re-attempt)
            └── the agent's run        its first answer decides; the chain announces a
                                       good one (auto_retry_end) before its tools (R-23a)
```

Why the first run is not in the nursery: a turn that succeeds first time (most of
them) then pays for no nursery and no exception-group unwrapping. Opening the nursery
first was measured (``benchmarks/session_costs.py``, ``first_try.overhead``): 1.59× the
bare agent loop against 1.40× this way, on the same machine in the same hour.

A 503 then a success, as it runs (``tests/test_retry_trace.py`` records these stacks
and checks them against this text). The chain starts from the prompt's task in two
hops, and its task reaches the hub in three (``auto_retry_start``):

```text
_session/facade.py:AgentSession.prompt
_retry/run.py:PromptRun.run                 first run; decide: RETRY; settle starts the task
  (the chain's task)
  _retry/run.py:PromptRun.run_chain
  _retry/chain.py:RetryChain.run            auto_retry_start, the wait, the re-attempt
  _session/hub.py:EventHub.emit
```

The success is announced by the chain's own loop, right after the re-attempt's first
answer (``AgentRun.next_message``) has returned, four hops from its task's root:

```text
_retry/run.py:PromptRun.run_chain
_retry/chain.py:RetryChain.run
_retry/chain.py:RetryChain._end
_session/hub.py:EventHub.emit
```

(a give-up and a cancel: the same four). Before issue 40 the success was announced
from inside the agent's stream, twelve hops deep: ``PromptController._run_chain`` →
``RetryChain.run`` → ``PromptController.reattempt`` → ``Agent.continue_`` →
``Agent._run`` → ``Agent._stream_turn`` → ``AgentSession._on_agent_event`` →
``PromptController.saw_message`` → ``RetryChain.succeed`` → ``RetryChain._end`` →
``PromptController.emit`` → ``EventHub.emit``.

This ``__init__`` imports nothing, so ``classify`` (which the providers use) costs no
more than itself.
"""
