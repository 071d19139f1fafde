"""The terminal UI: an event controller (pure) and the interactive app."""

from ._controller import EventController as EventController
from ._controller import loader_text as loader_text

__all__ = ["EventController", "loader_text"]
