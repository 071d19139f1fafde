"""Exception groups at the edges of the public API."""

from __future__ import annotations

from types import TracebackType

import trio


class unwrapped:  # lower case: it reads as the function it replaced, ``with unwrapped():``
    """Let a lone exception out of a nursery's exception group, as itself.

    Callers of ``prompt()`` or ``open_session()`` see what was raised — their own
    ``KeyError`` — rather than a group of one. Groups of several exceptions pass
    unchanged, and so do groups of ``trio.Cancelled``: whichever cancel scope caused
    the cancellation catches them inside the group, as Trio intends.

    Why not unwrap ``Cancelled`` too: an exception raised while a group is being handled
    (here, or in any context manager's exit) gets that group as its ``__context__``,
    and the group holds the exception — a reference cycle that keeps the frames, tasks
    and session of every aborted prompt alive until a full garbage collection
    (measured: about 110 objects per aborted session, a 2 s collection after 10 000
    aborts). Cancellation is the hot path; a lone error from a bug is not.

    A class rather than a ``@contextmanager`` generator: it costs one small object per
    use, and nothing but a type check when nothing was raised.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not isinstance(exc, BaseExceptionGroup) or len(exc.exceptions) != 1:
            return
        lone = exc.exceptions[0]
        if isinstance(lone, (BaseExceptionGroup, trio.Cancelled)):
            return
        try:
            raise lone from lone.__cause__
        finally:
            del lone, exc
