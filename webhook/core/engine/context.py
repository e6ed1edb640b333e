"""What every check is given besides its target: one frozen value per evaluation.

Gatekeeper hands its rules an AugmentedReview, Kyverno a PolicyContext; here a check's
`run(target, *, context, params)` gets the subject (the object, its namespace, and at
admission who asks and the object before an UPDATE), the cluster profile and the
inventory. Nothing of it rides in a target's `memo`, which is a cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.engine.subject import Subject
from webhook.core.supply.inventory import Inventory
from webhook.core.supply.profiles import ClusterProfile

_new = tuple.__new__


# A NamedTuple rather than a frozen dataclass: one is made for every evaluation.
class Context(NamedTuple):
    subject: Subject
    inventory: Inventory
    profile: ClusterProfile

    @classmethod
    def of(cls, subject: Subject, inventory: Inventory, profile: ClusterProfile) -> Context:
        """The same as Context(subject, inventory, profile), made at a tuple's cost (the
        generated __new__ is a Python call: ~100 ns of a request's evaluation)."""
        return _new(cls, (subject, inventory, profile))

    @property
    def namespace(self) -> str:
        """Where the object lives or is created: what a claim reference resolves in."""
        return self.subject.namespace

    @property
    def user(self) -> Mapping[str, Any] | None:
        """The admission request's userInfo; None in check, audit, diff and test."""
        return self.subject.user

    @property
    def old(self) -> Mapping[str, Any] | None:
        """The object before an UPDATE, at admission."""
        return self.subject.old

    @property
    def at_admission(self) -> bool:
        """Judged for a request (the webhook, or a test case that gives one)."""
        return self.subject.user is not None
