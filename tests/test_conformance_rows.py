"""The conformance kit's rows as data (issue 29): its classifier texts, its profiles' rows,
its timing rule and its docs table, without running an agent."""

from __future__ import annotations

import pytest

from trio_session import PI_1_6_PATTERNS, SEED_PATTERNS, AssistantMessage, classifier_for
from trio_session.conformance import report
from trio_session.conformance._checks import tolerance_ms
from trio_session.conformance._run import row_names, select
from trio_session.conformance._texts import PI_1_6_TEXTS, SEED_TEXTS, Text

TABLES = {"seed": (SEED_PATTERNS, SEED_TEXTS), "pi-1.6": (PI_1_6_PATTERNS, PI_1_6_TEXTS)}


def _message(text: Text) -> AssistantMessage:
    return AssistantMessage(stop_reason="error", error_message=f"{text.status} {text.text}")


@pytest.mark.parametrize("profile", ["seed", "pi-1.6"])
def test_every_pattern_of_the_profile_has_a_text_it_matches(profile: str) -> None:
    """R-5, R-7(a), R-58: one text per pattern of the profile's lists, which that pattern
    matches as the agent's message reads it (``"<status> <text>"``)."""
    table, texts = TABLES[profile]
    patterns = {p.name: p for p in (*table.retryable, *table.never_retry, *table.overflow)}
    served = [t for t in texts if t.family != "trap"]
    assert sorted(t.pattern for t in served) == sorted(patterns)
    for text in served:
        assert patterns[text.pattern].regex.search(f"{text.status} {text.text}"), text


@pytest.mark.parametrize("profile", ["seed", "pi-1.6"])
def test_each_text_is_retried_as_the_profile_classifies_it(profile: str) -> None:
    """R-4, R-58: the kit expects what the profile's classifier decides, text by text;
    retryable texts retried, never-retry and overflow texts not, traps as each profile says."""
    classifier = classifier_for(profile)
    for text in TABLES[profile][1]:
        message = _message(text)
        retried = classifier.is_retryable(message, 32_000)
        assert retried is text.retried, text
        if text.family in ("never-retry", "overflow"):
            assert not text.retried, text


def test_the_traps_split_the_profiles() -> None:
    """R-5's trap: digits inside ids are retried by the seed and not by pi-1.6 (R-58)."""
    seed = {t.text: t.retried for t in SEED_TEXTS if t.family == "trap"}
    pi16 = {t.text: t.retried for t in PI_1_6_TEXTS if t.family == "trap"}
    assert seed.keys() == pi16.keys()
    assert seed["The model 'gpt-5.5-preview-0429' does not exist"] is True
    assert pi16["The model 'gpt-5.5-preview-0429' does not exist"] is False


def test_the_tolerance_is_ten_percent_and_250_ms() -> None:
    """R-21: a sleep may differ from its announced delay by 10 % of it plus 250 ms."""
    assert (tolerance_ms(0), tolerance_ms(500), tolerance_ms(1000)) == (250, 300, 350)


def test_each_profile_has_its_rows() -> None:
    """The new rows run under both profiles; each profile has its own classifier rows."""
    seed = set(row_names("seed"))
    pi16 = set(row_names("pi-1.6"))
    new = {"agent-settled", "prompt-disposition", "delay-cap", "never-retry-quota"}
    new |= {"usage-limit-no-key-left", "overflow-nothing-to-compact", "summary-retry"}
    assert new <= seed & pi16
    assert seed - pi16 == {n for n in seed if n.startswith("classify-")}
    assert pi16 - seed == {n for n in pi16 if n.startswith("classify16-")}
    assert "classify16-never-retry" in pi16


def test_an_unknown_profile_or_a_scenario_of_the_other_profile_is_refused() -> None:
    """A usage mistake is one clear line (issue 29: --profile)."""
    with pytest.raises(
        ValueError, match=r"^unknown profile 'pi-2'; the profiles are: seed, pi-1\.6$"
    ):
        select(None, "pi-2")
    with pytest.raises(ValueError, match=r"^unknown scenario classify16-load under --profile seed"):
        select(["classify16-load"], "seed")


def test_the_report_renders_and_parses_its_table() -> None:
    """The docs table: a cell per (agent, profile), ``—`` where a scenario does not run."""
    columns = {("ours", "seed"): {"two-503-then-success": "pass", "classify-load": "pass"}}
    text = report.MARKER + "\n" + report.render(columns)
    assert "| `classify16-load` | — | — | — | — |" in text
    assert report.parse(text)[("ours", "seed")] == columns[("ours", "seed")]
    assert report.parse(text)[("pi16", "pi-1.6")] == {}
