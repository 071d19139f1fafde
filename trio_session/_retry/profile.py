"""Which rules the policy follows: ``retry.profile`` (SPEC R-53).

``"seed"`` (the default) is pi 0.73.1's policy as docs/spec.md §1–§11 state it;
``"pi-1.6"`` is pi 1.6.0's. Every place that acts differently per profile asks
``retry_profile`` or ``is_pi16`` — this module, so the setting is read one way. Pure.
"""

from __future__ import annotations

from .._settings_values import RetryProfile, Settings

SEED: RetryProfile = "seed"
PI_16: RetryProfile = "pi-1.6"


def retry_profile(settings: Settings) -> RetryProfile:
    """The profile in effect: ``retry.profile``.

    Args:
        settings: the effective settings now.
    """
    return settings.retry.profile


def is_pi16(settings: Settings) -> bool:
    """Whether ``retry.profile`` is ``"pi-1.6"``.

    Args:
        settings: the effective settings now.
    """
    return settings.retry.profile == PI_16
