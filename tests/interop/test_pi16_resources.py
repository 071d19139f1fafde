"""pi's prompt templates and frontmatter (issue 27 item 4) against pi 1.6.0 itself: its
own ``parseCommandArgs``/``substituteArgs`` and ``parseFrontmatter`` run under its node
on the cases of tests/test_pi_resources.py, and must answer as ours do."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from trio_session._pi.frontmatter import NOT_TEXT, FrontmatterError, parse_frontmatter
from trio_session._pi.resources import parse_command_args, substitute_args

from ..test_pi_resources import ARGUMENT_CASES, FRONTMATTER_CASES, TEMPLATE


def run_node(node: Path, package: Path, script: str, data: Any) -> Any:
    """Run ``script`` (an ES module given pi's package path as argv[1]) on JSON stdin."""
    result = subprocess.run(
        [str(node), "--input-type=module", "-e", script, "--", str(package)],
        input=json.dumps(data),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(result.stdout)


READ_STDIN = (
    "import { readFileSync } from 'fs'; const input = JSON.parse(readFileSync(0, 'utf-8'));"
)


def test_argument_splitting_and_substitution_match_pi(pi16_package: Path, node22: Path) -> None:
    """parse_command_args and substitute_args give what pi 1.6.0's functions give."""
    script = (
        READ_STDIN + "const m = await import(process.argv[1] + '/dist/core/prompt-templates.js');"
        "console.log(JSON.stringify(input.map((a) => "
        f"[m.parseCommandArgs(a), m.substituteArgs({json.dumps(TEMPLATE)}, "
        "m.parseCommandArgs(a))])));"
    )
    ours = [
        [parse_command_args(a), substitute_args(TEMPLATE, parse_command_args(a))]
        for a in ARGUMENT_CASES
    ]
    assert ours == run_node(node22, pi16_package, script, ARGUMENT_CASES)


def test_frontmatter_matches_pi(pi16_package: Path, node22: Path) -> None:
    """parse_frontmatter finds the same fields and body as pi 1.6.0's, and refuses what
    it refuses (a value that is not text compared as such)."""
    script = (
        READ_STDIN + "const m = await import(process.argv[1] + '/dist/utils/frontmatter.js');"
        "console.log(JSON.stringify(input.map((c) => { try {"
        "const {frontmatter, body} = m.parseFrontmatter(c); const f = {};"
        "if (frontmatter && typeof frontmatter === 'object' && !Array.isArray(frontmatter))"
        "for (const [k, v] of Object.entries(frontmatter)) f[k] = (typeof v === 'string' ||"
        " typeof v === 'boolean' || v === null) ? v : '<not text>';"
        "return [f, body]; } catch { return 'error'; } })));"
    )

    def ours(content: str) -> Any:
        try:
            fields, body = parse_frontmatter(content)
        except FrontmatterError:
            return "error"
        return [{k: "<not text>" if v is NOT_TEXT else v for k, v in fields.items()}, body]

    assert [ours(c) for c in FRONTMATTER_CASES] == run_node(
        node22, pi16_package, script, FRONTMATTER_CASES
    )
