"""The ``trio-session`` command. The only place that parses ``argv``.

``_main`` (the entry point) → ``_args`` (the parser) → ``_setup`` (flags to provider,
key check and session file) → ``_chat`` / ``_rpc`` (the two long-running commands),
``_demo`` (the offline demo, imported by its command alone) and ``_output`` (printing
events). Nothing imports back up that chain.
"""

from ._main import main

__all__ = ["main"]
