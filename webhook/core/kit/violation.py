"""What a check found: a rule id, the field that caused it, and the message."""

from __future__ import annotations

from dataclasses import dataclass

from webhook.core.kit.paths import Path


@dataclass(frozen=True, slots=True)
class Violation:
    """What a check found: a rule id, the field that caused it, and the message."""

    rule: str
    path: Path
    message: str
    # What cannot be known at admission (an envFrom source that may set a device list):
    # reported at most as a warning, whatever the policy's action, never as an allow.
    advisory: bool = False
