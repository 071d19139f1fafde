"""The conformance kit against the references (issues 18, 29): pi 0.73.1 under
``--profile seed``, pi 1.6.0 under ``--profile pi-1.6``.

The kit runs against both, and each verdict must be the one docs/conformance.md's
results table records for it (``python -m trio_session.conformance.report`` writes that
table); every pi row that FAILs must be explained on that page, as a real difference of
that pi from the profile. tests/test_conformance.py checks trio-session's columns.
"""

from __future__ import annotations

import re
from pathlib import Path

from trio_session.conformance import report
from trio_session.conformance._run import row_names

DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def explained(agent: str) -> set[str]:
    """The scenarios docs/conformance.md explains a FAIL of ``agent`` for: the bullets
    ``- `name` …`` under its heading ``### Why pi … FAILs``."""
    text = DOCS.read_text()
    heading = {"pi073": "### Why pi 0.73.1 FAILs", "pi16": "### Why pi 1.6.0 FAILs"}[agent]
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^- `([a-z0-9-]+)`", section, re.MULTILINE))


def test_the_docs_table_has_a_row_per_scenario() -> None:
    """Every scenario has a row, and a cell in each column of a profile it runs under."""
    columns = report.parse(DOCS.read_text())
    for _, agent, profile in report.COLUMNS:
        assert list(columns[(agent, profile)]) == list(row_names(profile))


def test_pi_073_under_the_seed_profile_as_recorded(pi_package: Path) -> None:
    """pi 0.73.1 holds the seed's rules (R-2 … R-52) but where the page explains a real
    difference (R-59's wider classifier, the summary request it sends with nothing to
    compact); R-17 is not tested: a pi agent directory holds one key."""
    got = report.run_verdicts(report.pi_command(pi_package), "seed")
    assert got == report.parse(DOCS.read_text())[("pi073", "seed")]
    assert got["usage-limit-second-key"] == "not tested"
    assert {name for name, verdict in got.items() if verdict == "FAIL"} == explained("pi073")


def test_pi_16_under_the_pi16_profile_as_recorded(pi16_package: Path, node22: Path) -> None:
    """pi 1.6.0 holds the pi-1.6 profile's rules (R-53 … R-58: agent_settled,
    disposition, the delay cap, never-retry) but where the page explains a real difference;
    R-17 is not tested."""
    got = report.run_verdicts(report.pi_command(pi16_package, str(node22)), "pi-1.6")
    assert got == report.parse(DOCS.read_text())[("pi16", "pi-1.6")]
    assert got["usage-limit-second-key"] == "not tested"
    assert {name for name, verdict in got.items() if verdict == "FAIL"} == explained("pi16")
