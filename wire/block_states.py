"""Why an envelope cannot be imported: the durable quarantine states.

The vocabulary of server/spec/v1.md "Pull state layers" and
docs/spec/age-v1-profile.md's failure table, plus two of our own (issues
#33, #34; specs/wire.md "Open outcomes"). It lives apart from the open
outcomes (:mod:`wire.outcome`, which re-exports it) because the store's
binding state machine and ``status`` need the names alone, not the records
of an opened envelope (issue #17, start-up).

Every state here is *held*: the envelope stays in quarantine, unprojected,
and ``reprocess`` judges it again. All but the :data:`SETTLED` ones are
also *blocking*: they need someone (a key, a newer program, a fixed sender)
and ``status`` shows them as such.
"""

from __future__ import annotations

import enum

__all__ = ["SETTLED", "BlockState"]


class BlockState(enum.StrEnum):
    """Why an envelope cannot be imported (durable quarantine states).

    The order is the order of the store's partial index over them
    (migration 14): new states are appended, never inserted.
    """

    UNSUPPORTED_CIPHER = "unsupported_cipher"
    PENDING_KEY = "pending_key"
    AUTHENTICATION_FAILED = "authentication_failed"
    MALFORMED = "malformed"
    POLICY_VIOLATION = "policy_violation"
    #: The age header does not carry exactly one X25519 stanza per recipient
    #: of the epoch manifest it claims: the writer's manifest drifted from
    #: the team's (age-v1 profile "Recipient-set epochs": fail closed).
    MANIFEST_MISMATCH = "manifest_mismatch"
    #: Sealed for an epoch this machine was never a recipient of: it joined
    #: the team by a later rotation. Expected, and nothing to fix here; only
    #: an identity of that epoch, installed later, would open it (issue #33).
    BEFORE_JOIN = "before_join"


#: Held states that need no one: not a failure, never ``blocked``.
SETTLED: frozenset[BlockState] = frozenset({BlockState.BEFORE_JOIN})
