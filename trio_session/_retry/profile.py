"""Which rules the policy follows: ``retry.profile`` and the classifier (SPEC R-53, R-57).

``"seed"`` (the default) is pi 0.73.1's policy as docs/spec.md §1–§11 state it;
``"pi-1.6"`` is pi 1.6.0's. This module is the one reader of ``retry.profile``
(``retry_profile``) and the one place a classifier is chosen (``classifier_of``):
every rule that acts differently per profile asks it, mostly through the policy value
(``policy.py:RetryPolicy``). Pure.
"""

from __future__ import annotations

from .._settings.values import RetryProfile, RetrySettings
from .classify import CLASSIFIERS, Classifier

PI_16: RetryProfile = "pi-1.6"


def retry_profile(retry: RetrySettings) -> RetryProfile:
    """The profile in effect: ``retry.profile`` (the one place the setting is read).

    Args:
        retry: the ``retry`` settings group, as it is now (R-11).
    """
    return retry.profile


def is_pi16(retry: RetrySettings) -> bool:
    """Whether pi 1.6.0's rules apply (``retry.profile: "pi-1.6"``).

    Args:
        retry: the ``retry`` settings group, as it is now (R-11).
    """
    return retry_profile(retry) == PI_16


def classifier_of(retry: RetrySettings, own: Classifier | None = None) -> Classifier:
    """The classifier in effect (R-8, R-53, R-57): the one place it is chosen.

    A session's own classifier wins; then ``retry.classifier: "strict"`` (ours, in
    either profile); otherwise the profile's own table decides: pi 0.73.1's under
    ``"seed"``, pi 1.6.0's under ``"pi-1.6"``. A run's end, a compaction's summary
    request and the tracer's labels all ask this, so they cannot disagree.

    Args:
        retry: the ``retry`` group (``profile`` and ``classifier``).
        own: the session's own classifier (``open_session(classifier=...)``), if any.
    """
    if own is not None:
        return own
    if retry.classifier == "strict":
        return CLASSIFIERS["strict"]
    return CLASSIFIERS[retry_profile(retry)]
