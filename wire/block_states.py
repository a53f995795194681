"""Why an envelope cannot be imported: the durable quarantine states.

The vocabulary of server/spec/v1.md "Pull state layers" and
docs/spec/age-v1-profile.md's failure table. It lives apart from the open
outcomes (:mod:`wire.outcome`, which re-exports it) because the store's
binding state machine and ``status`` need the names alone, not the records
of an opened envelope (issue #17, start-up).
"""

from __future__ import annotations

import enum

__all__ = ["BlockState"]


class BlockState(enum.StrEnum):
    """Why an envelope cannot be imported (durable quarantine states)."""

    UNSUPPORTED_CIPHER = "unsupported_cipher"
    PENDING_KEY = "pending_key"
    AUTHENTICATION_FAILED = "authentication_failed"
    MALFORMED = "malformed"
    POLICY_VIOLATION = "policy_violation"
