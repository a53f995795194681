"""Judging pulled envelopes (specs/engine.md §4.4; v1.md "Pull state
layers").

Every envelope is judged under the read policy effective at its own
``server_seq`` — the server policy history intersected with the local
security history — and then opened. The verdict is the driver's
``sync_pull_message`` status: ``importable`` with its plaintext projection,
or one of the blocking states with a bounded reason.

:func:`judge` is the part that costs CPU (for age-v1, an X25519 agreement
and a ChaCha20-Poly1305 pass per envelope). It is a pure function of its
arguments and the identity, so :mod:`syncengine.engine.workers` can run it
in other processes; :func:`start_evaluation` decides where it runs.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Protocol

from syncengine.engine.epochs import KeyEpoch
from syncengine.engine.security import ReadPolicy, SecurityHistory, read_policy
from syncengine.engine.state import ConnectionRecord
from syncengine.ops.sync_records import MAX_REASON_CHARS, SyncPullMessage
from wire import none_profile
from wire.envelope import Envelope
from wire.http_v1.capabilities import Capabilities
from wire.limits import ENVELOPE_VERSION, MAX_BLOB_BYTES
from wire.message import Message
from wire.outcome import Blocked, Importable
from wire.profiles import Binding, OpenContext, get_profile, open_envelope

__all__ = [
    "IdentityLookup",
    "JudgingPool",
    "Pulled",
    "Verdict",
    "joined_later",
    "judge",
    "judge_page",
    "start_evaluation",
]

#: (status, reason, projection): what opening one envelope amounts to.
Verdict = tuple[str, str | None, Message | None]
#: (server_seq, wire ID, server_received_at, envelope) of one pulled envelope.
Pulled = tuple[int, str, str, Envelope]


class JudgingPool(Protocol):
    """What :func:`start_evaluation` asks of a pool that opens envelopes
    elsewhere — :class:`syncengine.engine.workers.Workers` is one. It is
    declared here so that this module never imports
    :mod:`~syncengine.engine.workers`, which imports this one to run
    :func:`judge`."""

    def judge(
        self, items: Sequence[tuple[Envelope, str, int, frozenset[str]]]
    ) -> Callable[[], list[Verdict] | None]: ...


#: The identity of one epoch by ``key_id`` (``None``: not installed here).
IdentityLookup = Callable[[str], object | None]


def judge(
    envelope: Envelope,
    wire_id: str,
    seq: int,
    allowed_ciphers: frozenset[str],
    connection: ConnectionRecord,
    identity: IdentityLookup,
) -> Verdict:
    """Open one envelope at ``seq`` under ``allowed_ciphers`` (the policy at ``seq``).

    The trusted epoch is the one the key-epoch history makes effective at
    ``seq`` (profile "Recipient-set epochs"); a different ``key_id`` is
    ``policy_violation``, never trial-decrypted — except a key ID this
    machine has never heard of at a sequence its history does not yet
    settle (at or after its newest boundary): another machine may have
    rotated and this one not imported the snapshot yet, so the envelope
    waits as ``pending_key`` ("beyond its verified history coverage remain
    unprojected") and is judged again by ``reprocess`` after the import.
    The identity is asked for only when an age-v1 envelope passed policy.
    Without one, an envelope of an epoch this machine joined after
    (:func:`joined_later`) is ``before_join``, not ``pending_key``. The
    epoch's manifest goes to the profile, which checks the decrypted header
    against it (``manifest_mismatch``, issue #34).
    """
    epochs = connection.epochs
    trusted = epochs.at(seq)
    if (
        envelope.cipher == "age-v1"
        and envelope.cipher in allowed_ciphers
        and envelope.key_id is not None
        and (trusted is None or envelope.key_id != trusted.key_id)
        and epochs.by_key_id(envelope.key_id) is None
        and not epochs.covers(seq)
    ):
        return (
            "pending_key",
            f"epoch {envelope.key_id!r} is not in this machine's key-epoch history; import the "
            "team's epoch snapshot (syncengine keys epoch import)"[:MAX_REASON_CHARS],
            None,
        )
    identities: dict[str, object] = {}
    manifests: dict[str, tuple[str, ...]] = {}
    if (
        envelope.cipher == "age-v1"
        and envelope.cipher in allowed_ciphers
        and trusted is not None
        and envelope.key_id == trusted.key_id
    ):
        loaded = identity(trusted.key_id)
        if loaded is not None:
            identities[trusted.key_id] = loaded
        elif joined_later(trusted, epochs.epochs, identity):
            return (
                "before_join",
                f"sealed for epoch {trusted.key_id!r}, before this machine joined the team: none "
                "of its identities is a recipient of that epoch, so it cannot be opened here",
                None,
            )
        manifests[trusted.key_id] = trusted.recipients
    ctx = OpenContext(
        binding=Binding(connection.remote_team_id, wire_id, connection.protocol_version),
        allowed_ciphers=allowed_ciphers,
        trusted_key_id=trusted.key_id if trusted is not None else None,
        identities=identities,
        max_blob_bytes=MAX_BLOB_BYTES,
        manifests=manifests,
    )
    outcome = open_envelope(envelope, ctx)
    if isinstance(outcome, Importable):
        return "importable", None, outcome.message
    assert isinstance(outcome, Blocked)
    return outcome.state.value, outcome.reason[:MAX_REASON_CHARS], None


def joined_later(epoch: KeyEpoch, epochs: Sequence[KeyEpoch], identity: IdentityLookup) -> bool:
    """Whether this machine joined the team after ``epoch``: it holds an
    identity for a later epoch, and no identity it holds is a recipient of
    ``epoch``'s manifest (issue #33; specs/engine.md §6.5).

    Such an envelope was never sealed to this machine, so it is not waiting
    for a key: ``before_join``, held but not blocking. A machine that *was*
    a recipient and only lacks the identity file (none installed for that
    epoch, though its recipient is in the manifest), or one with no later
    identity at all (a removed machine, or none installed anywhere), keeps
    ``pending_key``. Only the public recipient of each identity is compared;
    the identities are the ones the engine already loads by epoch.
    """
    # start-up pin (CRYPTO): only this path loads wire.age_keys
    from wire.age_keys import X25519Identity
    from wire.age_profile import EpochManifest

    later = [
        identity(other.key_id)
        for other in epochs
        if other.revision > epoch.revision and other.identity_path is not None
    ]
    held = [loaded for loaded in later if isinstance(loaded, X25519Identity)]
    if not held or len(held) != len(later):
        return False
    manifest = EpochManifest.from_strings(epoch.key_id, epoch.recipients)
    return not any(manifest.contains(loaded.recipient) for loaded in held)


def judge_page(
    page: Sequence[Pulled],
    allowed: Sequence[frozenset[str]],
    connection: ConnectionRecord,
    identity: IdentityLookup,
) -> list[Verdict]:
    """``judge(envelope, wire_id, seq, allowed[i], connection, identity)`` for
    each item of ``page``, in order.

    A ``none`` envelope's verdict depends on nothing but the envelope and
    its policy's cipher set: :func:`judge` builds no identity for it, and
    :func:`~wire.profiles.open_envelope` refuses a version other than
    ``ENVELOPE_VERSION`` or a cipher outside the set, then hands it to the
    ``none`` profile, which refuses a non-null ``key_id`` and opens the
    blob under :data:`~wire.limits.MAX_BLOB_BYTES`. So the page's ``none``
    envelopes that pass those envelope rules are opened together by
    :func:`~wire.none_profile.open_canonical_page` (the very messages
    ``open`` imports, every plaintext rule applied); any it does not plainly
    accept, and every other envelope, go through :func:`judge` one by one,
    which gives each blocking verdict its reason (v1.md "Pull state layers").
    """
    plain = (
        [
            index
            for index, (item, ciphers) in enumerate(zip(page, allowed, strict=True))
            if item[3].cipher == none_profile.CIPHER
            and item[3].v == ENVELOPE_VERSION
            and item[3].key_id is None
            and item[3].blob_data
            and none_profile.CIPHER in ciphers
        ]
        if get_profile(none_profile.CIPHER) is none_profile.PROFILE
        else []
    )
    verdicts: list[Verdict | None] = [None] * len(page)
    opened = none_profile.open_canonical_page([page[i][3].blob_data for i in plain], MAX_BLOB_BYTES)
    for index, message in zip(plain, opened, strict=True):
        if message is not None:
            verdicts[index] = ("importable", None, message)
    return [
        verdict
        if verdict is not None
        else judge(item[3], item[1], item[0], ciphers, connection, identity)
        for item, ciphers, verdict in zip(page, allowed, verdicts, strict=True)
    ]


#: What both histories bisect on to find the entry effective at a sequence
#: (:meth:`Capabilities.policy_at`, :meth:`SecurityHistory.at`).
_BOUNDARY = attrgetter("effective_from_seq")


def read_policies(
    caps: Capabilities, history: SecurityHistory, seqs: Sequence[int]
) -> list[ReadPolicy]:
    """``read_policy(caps, history, seq)`` for each of ``seqs``, in order.

    Both histories are step functions of the sequence: each finds its entry
    as the last one whose ``effective_from_seq`` is at most the sequence (a
    bisection). When neither holds a boundary in ``(min, max]`` of the
    page's sequences, every sequence of the page lands on the same two
    entries, so one policy is every envelope's (v1.md "Pull state layers":
    the policy effective at each ``server_seq`` — here the same one); a
    page that straddles a boundary asks per sequence.
    """
    if not seqs:
        return []
    low, high = min(seqs), max(seqs)
    if _one_step(caps.policy_history, low, high) and _one_step(history.entries, low, high):
        return [read_policy(caps, history, low)] * len(seqs)
    return [read_policy(caps, history, seq) for seq in seqs]


def _one_step(entries: Sequence[object], low: int, high: int) -> bool:
    """Whether ``low`` and ``high`` fall after the same entry of a history
    ascending by boundary (no boundary in ``(low, high]``)."""
    return bisect.bisect_right(entries, low, key=_BOUNDARY) == bisect.bisect_right(
        entries, high, key=_BOUNDARY
    )


def start_evaluation(
    page: Sequence[Pulled],
    *,
    caps: Capabilities,
    history: SecurityHistory,
    connection: ConnectionRecord,
    identity: IdentityLookup,
    workers: Callable[[int], JudgingPool | None],
) -> Callable[[], list[SyncPullMessage]]:
    """Start evaluating a page; the result, called, gives the page's
    ``sync_pull_message`` records in order.

    ``workers`` is offered the number of age-v1 envelopes and may return a
    pool: the openings then run there while the caller goes on (the engine
    applies the previous page meanwhile). Otherwise, or if the pool fails,
    they run here.
    """
    policies = read_policies(caps, history, [item[0] for item in page])
    sealed = sum(1 for item in page if item[3].cipher == "age-v1")
    pool = workers(sealed) if sealed else None
    pending: Callable[[], list[Verdict] | None] | None = None
    if pool is not None:
        # An unreadable identity file fails here, named, not in a worker —
        # those of later epochs too, which ``joined_later`` may read.
        for key_id in {item[3].key_id for item in page if item[3].cipher == "age-v1"}:
            epoch = connection.epochs.by_key_id(key_id) if key_id is not None else None
            if epoch is not None and identity(epoch.key_id) is None:
                for other in connection.epochs.epochs[epoch.revision + 1 :]:
                    if other.identity_path is not None:
                        identity(other.key_id)
        pending = pool.judge(
            [
                (item[3], item[1], item[0], policy.allowed_ciphers)
                for item, policy in zip(page, policies, strict=True)
            ]
        )

    def finish() -> list[SyncPullMessage]:
        verdicts = pending() if pending is not None else None
        if verdicts is None:
            verdicts = judge_page(
                page, [policy.allowed_ciphers for policy in policies], connection, identity
            )
        return [
            SyncPullMessage(
                seq,
                wire_id,
                received,
                envelope,
                status,
                policy.policy_revision,
                policy.local_security_revision,
                reason,
                projection,
            )
            for (seq, wire_id, received, envelope), policy, (status, reason, projection) in zip(
                page, policies, verdicts, strict=True
            )
        ]

    return finish
