"""Adopting our own messages after a restore (issue #15, item 5).

A store brought back from a backup may hold local messages that were
published *after* the backup was taken: in the backup they have no
reservation, so a push would seal them again under new wire IDs and the
relay would store each a second time — and the pull would bring the first
copy back as an import. While a binding is *adopting* (``sync_bindings.
adopt_own``, set in every backup file by ``syncengine backup``), apply_pull
first looks, for each importable page message whose wire ID this binding
does not hold, for a local message nobody reserved (or one blocked by a
size limit) with the same sender, recipient, body and creation time, and
reserves it under the pulled wire ID and envelope. The plan then sees the
echo of our own push (``reservation_next(…, ECHO)``): the reservation is
acknowledged at the pulled sequence and nothing is imported. The engine
pushes nothing while a binding adopts, pulls to the relay's head, then
clears the flag (:func:`finish_adoption`): whatever is still unreserved was
never published.

Two genuinely distinct local messages identical in all four fields pair
with the relay's copies one to one, oldest first — as good as any order,
since nothing distinguishes them.

A *new* binding of a team that already holds messages (``connect`` to a
relay rebuilt from nothing, after ``disconnect``) adopts its own messages
the same way, and its earlier imports for as long as they take to arrive:
the other machines re-publish their own messages to the new relay whenever
they rebind, so ``connect`` lists every pulled message no quarantine row of
the new binding points at in ``sync_adoptable`` (by content digest), and
an importable page message matching one is recorded as imported *onto*
it, never a second copy (:func:`mark_adoptable`, :func:`adopt_held_imports`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from syncengine.ops.history_counts import add_history
from syncengine.store.event_log import canonical_at
from wire.message import Message

if TYPE_CHECKING:
    # Only annotations: apsw loads with the store's first connection
    # (syncengine/store/connection.py), never with this module.
    import apsw

    # Only annotations: the engine's adoption check at the end of an idle
    # pull never defines the Stage-1 records (issue #17, start-up).
    from syncengine.ops.sync_records import SyncPullMessage

__all__ = [
    "Adoption",
    "LocalCandidate",
    "adopt_held_imports",
    "adopt_own_messages",
    "adopting",
    "content_digest",
    "finish_adoption",
    "mark_adoptable",
    "plan_adopt_held",
    "plan_adopt_own",
]


# -- the pure plans -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocalCandidate:
    """A local message that may be a page message's own copy: same body,
    never reserved (``fresh``) or reserved but blocked by a size limit."""

    seq: int
    sender: str
    recipient: str
    #: ``created_at`` in its canonical v1 form, as a projection carries it.
    created_at: str
    #: No ``sync_push`` row yet (a blocked row is replaced, not added, so
    #: only a fresh one counts as a new push in the history counters).
    fresh: bool


@dataclass(frozen=True, slots=True)
class Adoption:
    """One decision: page message ``index`` is local message ``seq``."""

    index: int
    seq: int
    fresh: bool


def plan_adopt_own(
    wanted: Sequence[Message], candidates: Sequence[Sequence[LocalCandidate]]
) -> tuple[Adoption, ...]:
    """Pair each wanted page message (``wanted[i]``, with its same-body
    local candidates ``candidates[i]`` in ``seq`` order) with the oldest
    candidate of the same sender, recipient and creation time that no
    earlier page message took. Pure: a local message is adopted at most
    once, so two identical local messages pair one to one with the relay's
    copies, oldest first (module docstring; issue #15 item 5)."""
    taken: set[int] = set()
    adoptions: list[Adoption] = []
    for index, (projection, rows) in enumerate(zip(wanted, candidates, strict=True)):
        match = next(
            (
                row
                for row in rows
                if row.seq not in taken
                and (row.sender, row.recipient) == (projection.from_agent, projection.to_agent)
                and row.created_at == projection.created_at
            ),
            None,
        )
        if match is None:
            continue
        taken.add(match.seq)
        adoptions.append(Adoption(index, match.seq, match.fresh))
    return tuple(adoptions)


def plan_adopt_held(
    digests: Sequence[bytes], adoptable: Mapping[bytes, Sequence[int]]
) -> tuple[tuple[int, int], ...]:
    """Pair each page message (``digests[i]``, its content digest) with the
    lowest adoptable local position of the same digest not yet taken;
    returns ``(index, local_position)`` pairs. Pure: each adoptable row is
    taken at most once, in position order, so a held import is never the
    import of two page messages (module docstring, :func:`mark_adoptable`)."""
    next_free: dict[bytes, int] = {}
    pairs: list[tuple[int, int]] = []
    for index, digest in enumerate(digests):
        positions = adoptable.get(digest, ())
        taken = next_free.get(digest, 0)
        if taken >= len(positions):
            continue
        next_free[digest] = taken + 1
        pairs.append((index, positions[taken]))
    return tuple(pairs)


def _wanted(
    messages: Sequence[SyncPullMessage], held_wire_ids: set[str]
) -> list[tuple[SyncPullMessage, Message]]:
    """The page's importable messages whose wire ID this binding does not
    hold, each with its plaintext projection (pure)."""
    return [
        (m, m.projection)
        for m in messages
        if m.status == "importable"
        and isinstance(m.projection, Message)
        and m.wire_id not in held_wire_ids
    ]


# -- the shells -----------------------------------------------------------------------


def adopting(conn: apsw.Connection, binding_pk: int) -> bool:
    row = conn.execute(
        "SELECT adopt_own FROM sync_bindings WHERE binding_pk = ?", (binding_pk,)
    ).fetchone()
    return bool(row and row[0])


def finish_adoption(conn: apsw.Connection, binding_pk: int) -> bool:
    """The pull reached the relay's head: stop adopting; True if it was."""
    conn.execute(
        "UPDATE sync_bindings SET adopt_own = 0 WHERE binding_pk = ? AND adopt_own = 1",
        (binding_pk,),
    )
    return bool(conn.changes())


def adopt_own_messages(
    conn: apsw.Connection,
    binding_pk: int,
    team_pk: int,
    push_cursor: int,
    messages: Sequence[SyncPullMessage],
    held_wire_ids: set[str],
) -> int:
    """Reserve matching local messages under the page's wire IDs; returns how
    many were adopted (inside the caller's apply transaction). Loads each
    wanted message's same-body candidates, lets :func:`plan_adopt_own`
    choose, and writes its reservations."""
    wanted = _wanted(messages, held_wire_ids)
    if not wanted:
        return 0
    candidates = [
        [
            LocalCandidate(int(seq), str(sender), str(recipient), canonical_at(at), bool(fresh))
            for seq, at, sender, recipient, fresh in conn.execute(
                "SELECT m.seq, m.at, s.name, r.name, p.local_position IS NULL"
                " FROM messages AS m INDEXED BY messages_local_by_team"
                " JOIN members AS s ON s.member_pk = m.sender_pk"
                " JOIN members AS r ON r.member_pk = m.recipient_pk"
                " LEFT JOIN sync_push AS p ON p.binding_pk = ? AND p.local_position = m.seq"
                " WHERE m.team_pk = ? AND m.origin = 'local' AND m.seq > ? AND m.body = ?"
                " AND (p.local_position IS NULL OR p.state = 'blocked')"
                " ORDER BY m.seq",
                (binding_pk, team_pk, push_cursor, projection.body),
            )
        ]
        for _, projection in wanted
    ]
    adoptions = plan_adopt_own([projection for _, projection in wanted], candidates)
    for adoption in adoptions:
        env = wanted[adoption.index][0].envelope
        conn.execute(
            "INSERT OR REPLACE INTO sync_push (binding_pk, local_position, state, wire_id,"
            " envelope_v, cipher, key_id, blob) VALUES (?, ?, 'reserved', ?, ?, ?, ?, ?)",
            (
                binding_pk,
                adoption.seq,
                wanted[adoption.index][0].wire_id,
                env.v,
                env.cipher,
                env.key_id,
                env.blob,
            ),
        )
        if adoption.fresh:  # a blocked row is replaced, not added
            add_history(conn, binding_pk, push=1)
    return len(adoptions)


def content_digest(sender: str, recipient: str, body: str, created_at: str) -> bytes:
    """SHA-256 of the four plaintext fields in their v1 form (RFC 8785 JCS of
    the ``none`` plaintext object), so a held message and a pulled one with
    the same content meet on one index key."""
    import hashlib

    return hashlib.sha256(Message(body, created_at, sender, recipient).to_jcs()).digest()


def mark_adoptable(conn: apsw.Connection, binding_pk: int, team_pk: int) -> int:
    """A new binding over an existing history: every pulled message of the
    team that no quarantine row of this binding points at becomes adoptable
    (inside connect's transaction); returns how many."""
    rows: list[tuple[int, str, str, str, str]] = list(
        conn.execute(
            "SELECT m.seq, s.name, r.name, m.body, m.at FROM messages AS m"
            " JOIN members AS s ON s.member_pk = m.sender_pk"
            " JOIN members AS r ON r.member_pk = m.recipient_pk"
            " WHERE m.team_pk = ? AND m.origin = 'imported'"
            " AND NOT EXISTS (SELECT 1 FROM sync_quarantine AS q"
            "   WHERE q.binding_pk = ? AND q.local_position = m.seq)",
            (team_pk, binding_pk),
        )
    )
    conn.executemany(
        "INSERT OR IGNORE INTO sync_adoptable (binding_pk, local_position, content_digest)"
        " VALUES (?, ?, ?)",
        [
            (binding_pk, seq, content_digest(sender, recipient, body, canonical_at(at)))
            for seq, sender, recipient, body, at in rows
        ],
    )
    return len(rows)


def adopt_held_imports(
    conn: apsw.Connection,
    binding_pk: int,
    messages: Sequence[SyncPullMessage],
    held_wire_ids: set[str],
) -> list[tuple[SyncPullMessage, int]]:
    """The page messages this store already holds (``sync_adoptable``), each
    with the local message it is, taken off the list (inside the caller's
    apply transaction; the caller records them as imported onto it). One
    indexed probe per distinct content digest of the page, and none at all
    for a binding with nothing adoptable; :func:`plan_adopt_held` pairs."""
    if (
        conn.execute(
            "SELECT 1 FROM sync_adoptable WHERE binding_pk = ? LIMIT 1", (binding_pk,)
        ).fetchone()
        is None
    ):
        return []
    wanted = _wanted(messages, held_wire_ids)
    digests = [content_digest(p.from_agent, p.to_agent, p.body, p.created_at) for _, p in wanted]
    adoptable = {
        digest: [
            int(row[0])
            for row in conn.execute(
                "SELECT local_position FROM sync_adoptable"
                " WHERE binding_pk = ? AND content_digest = ? ORDER BY local_position",
                (binding_pk, digest),
            )
        ]
        for digest in set(digests)
    }
    pairs = plan_adopt_held(digests, adoptable)
    conn.executemany(
        "DELETE FROM sync_adoptable WHERE binding_pk = ? AND local_position = ?",
        [(binding_pk, position) for _, position in pairs],
    )
    return [(wanted[index][0], position) for index, position in pairs]
