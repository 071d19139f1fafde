"""Our classifiers against pi's own, text by text, under node 22 (R-57, R-58, R-59).

``pi_classify.mjs`` loads the installed pi (1.6.0 or 0.73.1), reads pi's pattern lists
from its own files, and asks pi's own ``AgentSession._isRetryableError`` and
``isContextOverflow`` about each text. pi 1.6.0 gets every sample of
``tests/test_classifier_tables.py:PI16_SAMPLES`` (one or more per pattern of its tables,
the traps, JavaScript's regex dialect) and every row of the R-8 corpus; ours under
``"pi-1.6"`` must agree on each. pi 0.73.1 gets ``PI073_SAMPLES`` (one or more per
alternative of its pattern) and the corpus; the seed agrees with it except on the texts
declared here, each with the rule that makes the seed differ.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.test_classifier_tables import PI073_SAMPLES, PI16_SAMPLES, Sample
from tests.test_classifier_tables import decide as decide_sample
from tests.test_classify_corpus import CORPUS
from trio_session import PI_1_6_CLASSIFIER, PI_1_6_PATTERNS, REFERENCE_CLASSIFIER, SEED_PATTERNS

SCRIPT = Path(__file__).with_name("pi_classify.mjs")

#: Corpus rows the seed decides otherwise than pi 0.73.1's own code, each with its rule.
SEED_DECLARED: dict[str, str] = {
    "anthropic-400-api-usage-limits": "R-5: usage.?limit, which 0.73.1 lacks",
    "chatgpt-subscription-usage-limit": "R-5: usage.?limit, which 0.73.1 lacks",
    "ollama-connection-refused": "R-5: no connection.?refused",
    "network-read-timeout": "R-5: no timed? out",
    "trap-unsupported-parameter-timeout": "R-5: no timeout",
    "node-socket-hang-up": "R-5: no socket hang up",
    "undici-terminated": "R-5: no terminated",
    "trap-account-terminated": "R-5: no terminated",
    "undici-other-side-closed": "R-5: no other side closed",
    "network-connection-lost": "R-5: no connection.?lost",
    "stream-ended-without-chunks": "R-5: no ended without",
    "bedrock-http2-no-response": "R-5: no http2 request did not get a response",
    "cerebras-429-tokens-per-minute": "R-7(a): no too-many-requests veto",
}


def _corpus_sample(row: Any) -> Sample:
    return Sample(row.text, row.pi16, provider=row.provider, stop_reason=row.stop_reason)


def _ask(node22: Path, package: Path, samples: list[Sample]) -> dict[str, Any]:
    done = subprocess.run(
        [str(node22), str(SCRIPT), str(package)],
        input=json.dumps([s.case() for s in samples]),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    assert len(answer["decisions"]) == len(samples)
    return answer


def _flat(samples: dict[tuple[str, str], tuple[Sample, ...]]) -> list[tuple[str, Sample]]:
    return [
        (f"{kind}:{name}:{i}", sample)
        for (kind, name), group in samples.items()
        for i, sample in enumerate(group)
    ]


@cache
def _pi16(node22: Path, package: Path) -> dict[str, Any]:
    return _ask(
        node22, package, [s for _, s in _flat(PI16_SAMPLES)] + [_corpus_sample(r) for r in CORPUS]
    )


@cache
def _pi073(node22: Path, package: Path) -> dict[str, Any]:
    return _ask(
        node22, package, [s for _, s in _flat(PI073_SAMPLES)] + [_corpus_sample(r) for r in CORPUS]
    )


def test_pi16_tables_are_pis_own(node22: Path, pi16_package: Path) -> None:
    """R-57, R-58: PI_1_6_PATTERNS holds pi 1.6.0's lists as its files hold them: same
    sources, same order, flag i."""
    tables = _pi16(node22, pi16_package)["tables"]
    assert _pi16(node22, pi16_package)["version"] == "1.6.0"
    assert tables["retryable"] == [p.source for p in PI_1_6_PATTERNS.retryable]
    assert tables["neverRetry"] == [p.source for p in PI_1_6_PATTERNS.never_retry]
    assert tables["overflow"] == [
        {"source": p.source, "flags": "i"} for p in PI_1_6_PATTERNS.overflow
    ]
    assert tables["notOverflow"] == [
        {"source": p.source, "flags": "i"} for p in PI_1_6_PATTERNS.not_overflow
    ]
    assert tables["bodyless"] == {"source": PI_1_6_PATTERNS.bodyless_overflow.source, "flags": "i"}


def test_pi16_agrees_on_every_sample(node22: Path, pi16_package: Path) -> None:
    """R-58: pi 1.6.0's own classifier and ours under "pi-1.6" decide every sample alike,
    and as the sample says (one or more per pattern, traps and dialect included)."""
    decisions = _pi16(node22, pi16_package)["decisions"]
    flat = _flat(PI16_SAMPLES)
    mismatches = [
        (name, sample.text, pi, decide_sample(PI_1_6_CLASSIFIER, sample), sample.pi)
        for (name, sample), pi in zip(flat, decisions, strict=False)
        if not pi == decide_sample(PI_1_6_CLASSIFIER, sample) == sample.pi
    ]
    assert mismatches == []
    assert len(flat) >= 150


def test_pi16_agrees_on_the_corpus(node22: Path, pi16_package: Path) -> None:
    """R-58: pi 1.6.0 decides every row of the R-8 corpus as its pi16 column says, and so
    do we."""
    decisions = _pi16(node22, pi16_package)["decisions"][len(_flat(PI16_SAMPLES)) :]
    mismatches = [
        (row.id, pi, row.pi16)
        for row, pi in zip(CORPUS, decisions, strict=True)
        if not pi == row.pi16 == decide_sample(PI_1_6_CLASSIFIER, _corpus_sample(row))
    ]
    assert mismatches == []


def test_pi073_pattern_has_a_sample_each(node22: Path, pi_package: Path) -> None:
    """R-59: every alternative of pi 0.73.1's retryable pattern and every pattern of its
    overflow check (as its own files hold them) has a sample here."""
    answer = _pi073(node22, pi_package)
    assert answer["version"] == "0.73.1"
    tables = answer["tables"]
    assert tables["retryableFlags"] == "i"
    assert {("retryable", s) for s in tables["retryable"]} == {
        key for key in PI073_SAMPLES if key[0] == "retryable"
    }
    assert {("overflow", p["source"]) for p in tables["overflow"]} == {
        key for key in PI073_SAMPLES if key[0] == "overflow"
    }
    assert {("not_overflow", p["source"]) for p in tables["notOverflow"]} == {
        key for key in PI073_SAMPLES if key[0] == "not_overflow"
    }
    seed_only = {p.source for p in SEED_PATTERNS.retryable} - set(tables["retryable"])
    assert {("seed", s) for s in seed_only} == {key for key in PI073_SAMPLES if key[0] == "seed"}


def test_pi073_and_seed_agree_but_where_declared(node22: Path, pi_package: Path) -> None:
    """R-59: pi 0.73.1's own classifier decides each sample as the sample says; the seed
    decides it alike, except on the texts declared with their rule (R-5, R-7)."""
    decisions = _pi073(node22, pi_package)["decisions"]
    flat = _flat(PI073_SAMPLES)
    wrong = [
        (name, sample.text, pi, sample.pi)
        for (name, sample), pi in zip(flat, decisions, strict=False)
        if pi != sample.pi
    ]
    assert wrong == []
    assert {sample.rule for _, sample in flat if sample.rule} == {"R-5", "R-7(a)", "R-7(b)"}
    for _name, sample in flat:
        assert decide_sample(REFERENCE_CLASSIFIER, sample) == (sample.seed or sample.pi)


def test_pi073_and_seed_on_the_corpus(node22: Path, pi_package: Path) -> None:
    """R-59: on the R-8 corpus the seed and pi 0.73.1 differ exactly on the declared rows."""
    decisions = _pi073(node22, pi_package)["decisions"][len(_flat(PI073_SAMPLES)) :]
    differ = {
        row.id
        for row, pi in zip(CORPUS, decisions, strict=True)
        if pi != decide_sample(REFERENCE_CLASSIFIER, _corpus_sample(row))
    }
    assert differ == set(SEED_DECLARED)


@pytest.mark.parametrize("rule", sorted(set(SEED_DECLARED.values())))
def test_every_declared_row_names_a_rule(rule: str) -> None:
    """R-59: each declared corpus row says which seed rule makes it differ."""
    assert rule.startswith(("R-5: ", "R-7(a): "))
