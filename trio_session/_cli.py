"""The old home of the ``trio-session`` entry point (``trio_session._cli:main``); it is
``trio_session.cli.main`` now. Kept so an install made before the move still starts."""

from .cli import main

__all__ = ["main"]
