"""A conformance kit: runs the retry policy's scenarios against any agent in RPC mode.

``trio-session conformance -- <command>`` starts a scripted OpenAI-compatible server on
127.0.0.1, starts the command once per scenario (pointed at the server by a pi-style
agent directory in ``PI_CODING_AGENT_DIR``), drives it over pi's RPC protocol and checks
what it did against the rules of docs/spec.md. See docs/conformance.md.

Not imported by ``import trio_session``.
"""

from __future__ import annotations

from ._agent import AgentError
from ._checks import Check, Result
from ._run import passed, print_json, print_table, run_all, run_command, run_scenario, select
from ._scenarios import SCENARIOS, Scenario
from ._server import Hang, HttpError, LoopbackLLM, Stream

__all__ = [
    "SCENARIOS",
    "AgentError",
    "Check",
    "Hang",
    "HttpError",
    "LoopbackLLM",
    "Result",
    "Scenario",
    "Stream",
    "passed",
    "print_json",
    "print_table",
    "run_all",
    "run_command",
    "run_scenario",
    "select",
]
