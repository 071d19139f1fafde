"""The conformance kit against the reference, pi 0.73.1 (issue 18).

pi must hold every seed rule but R-17 (it has no usage-limit credential switch and one
key per provider, so ``usage-limit-second-key`` fails and the exit status is 1), differ
otherwise only on [beyond] rules, and give exactly the verdicts docs/conformance.md
records for it; trio-session's column there must say ``pass`` everywhere
(tests/test_conformance.py runs ours).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from trio_session.conformance import SCENARIOS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \| (\S+) \| (\S+) \|$")


def recorded_results() -> dict[str, tuple[str, str]]:
    """The results table of docs/conformance.md: scenario → (trio-session, pi)."""
    text = DOCS.read_text().split("<!-- conformance-results -->", 1)[1]
    rows = {}
    for line in text.splitlines():
        if match := _ROW.match(line.strip()):
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_the_docs_table_covers_every_scenario_and_ours_pass() -> None:
    rows = recorded_results()
    assert list(rows) == [s.name for s in SCENARIOS]
    assert {ours for ours, _ in rows.values()} == {"pass"}


def test_pi_holds_every_seed_rule_as_recorded(pi_package: Path) -> None:
    """R-4, R-5, R-12, R-15, R-16, R-19, R-23a, R-29, R-30, R-32, R-36, R-50 hold for pi;
    R-17 does not (usage-limit-second-key), as docs/conformance.md records."""
    pi = ["node", str(pi_package / "dist" / "cli.js"), "--mode", "rpc", "--no-session"]
    result = subprocess.run(
        [sys.executable, "-m", "trio_session", "conformance", "--json", "--", *pi],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1, result.stdout[-4000:] + result.stderr[-2000:]
    document = json.loads(result.stdout)
    assert document["passed"] is False
    verdicts = {s["name"]: s["verdict"] for s in document["scenarios"]}
    assert verdicts == {name: pi for name, (_, pi) in recorded_results().items()}
    for scenario in document["scenarios"]:
        failed = [c for c in scenario["checks"] if not c["ok"] and not c["beyond"]]
        if scenario["name"] == "usage-limit-second-key":
            # One key, no switch: the exponential delays, every request with key A.
            assert {c["rules"] for c in failed} == {"R-17"}, scenario
            assert "start(1/3,100ms) start(2/3,200ms)" in scenario["observed"], scenario
            assert all("key B" not in c["observed"] for c in failed), scenario
        else:
            assert not failed, scenario
