"""``seed``: give a machine the team's older history from a teammate's backup
(issue #33; specs/engine.md §7.2).

A machine that joined an encrypted team by a rotation holds the older
envelopes as ``before_join`` (or ``pending_key``): it pulled them, it can
never open them. A teammate's backup holds the same messages opened — each
one under the wire ID, sequence and exact envelope it has on the relay (an
acknowledged push of that machine, or an import of its own). Seeding joins
the two by wire ID, in one transaction of *this* store:

* a held row of this binding is seeded only when the backup maps the same
  wire ID, in the same stream, to the same ``server_seq`` and the same
  envelope byte for byte; any difference refuses the whole seed (the backup
  is not of this stream, or one side is damaged) and nothing is written;
* each seeded message is imported into the local team (origin
  ``imported``: never a push candidate, so nothing is published twice) and
  its row becomes ``imported`` with that position — exactly the state a
  pull that could open the envelope would have left; a later pull of the
  same envelope finds it and reports ``reconciled``;
* read state is kept: this machine's own is untouched; a seeded message
  its recipient had read in the backup is read here too, and the relay's
  read facts (frontiers, exact reads) are projected onto it through the
  new mapping (:func:`syncengine.store.read_overlay.on_mappings`, which
  also queues the carried reads for upload — a set union there).

This machine's identity, credential, binding, cursors and epoch history are
never read from the backup. Rows the backup has no message for stay as they
were; a rerun seeds only what is still held (crash point ``seed.commit``).
The backup is trusted for the plaintext it holds — it is a teammate's
store, handed over like an identity file — but only for envelopes this
machine pulled itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.ids import new_uuid7s
from syncengine.ops.bindings import BindingKey, load_binding, sync_transaction
from syncengine.store import read_overlay
from syncengine.store.connection import Row
from syncengine.store.errors import InvalidInput
from syncengine.store.event_log import import_projected_sent
from syncengine.store.messages import log_tip

if TYPE_CHECKING:
    import apsw

__all__ = [
    "SEEDABLE_STATUSES",
    "SeedResult",
    "SeededMessage",
    "held_wire_ids",
    "read_backup",
    "seed_history",
]

#: The held statuses a backup may fill in: the envelopes this machine cannot
#: open for want of a key. Integrity outcomes (``authentication_failed``,
#: ``manifest_mismatch``, ``policy_violation``, ``malformed``) stay: a
#: teammate's plaintext must not paper over an envelope that broke a rule.
SEEDABLE_STATUSES = ("before_join", "pending_key")
_IN_CHUNK = 400

#: (v, cipher, key_id, blob) of an envelope.
EnvelopeKey = tuple[int, str, str | None, str]


@dataclass(frozen=True, slots=True)
class SeededMessage:
    """One message of the backup with its relay mapping, as the backup holds it."""

    wire_id: str
    server_seq: int
    envelope: EnvelopeKey
    sender: str
    recipient: str
    body: str
    created_at: str
    #: Whether its recipient had read it in the backup.
    read: bool


@dataclass(frozen=True, slots=True)
class SeedResult:
    """What one seed did: ``seeded`` messages imported from the backup (``read``
    of them carried over as read), ``unmatched`` held rows the backup had no
    message for (they stay as they were)."""

    seeded: int
    read: int
    unmatched: int

    def to_obj(self) -> dict[str, Any]:
        return {"seeded": self.seeded, "read": self.read, "unmatched": self.unmatched}


def _chunks(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[i : i + _IN_CHUNK] for i in range(0, len(values), _IN_CHUNK)]


def read_backup(source: Any, key: BindingKey, wire_ids: Sequence[str]) -> dict[str, SeededMessage]:
    """The backup's messages mapped to ``wire_ids`` in the stream of ``key``
    (matched by relay instance, remote team and protocol version: the local
    team's name may differ between machines), by wire ID.

    ``source`` is a connection to a store at this program's schema version.
    """
    row = source.execute(
        "SELECT binding_pk FROM sync_bindings WHERE server_instance_id = ?"
        " AND remote_team_id = ? AND protocol_version = ?",
        (key.server_instance_id, key.remote_team_id, key.protocol_version),
    ).fetchone()
    if row is None:
        raise InvalidInput(
            "--input",
            f"the backup holds no history of this team's stream (relay instance "
            f"{key.server_instance_id}, team {key.remote_team_id}); seed from a backup of a "
            "machine connected to the same relay team",
        )
    binding_pk = int(row[0])
    found: dict[str, SeededMessage] = {}
    for part in _chunks(wire_ids):
        marks = ",".join("?" * len(part))
        for source_table, condition in (
            ("sync_push", "x.state = 'acked'"),
            ("sync_quarantine", "x.status = 'imported' AND x.local_position IS NOT NULL"),
        ):
            position = "x.local_position"
            for r in source.execute(
                "SELECT x.wire_id, x.server_seq, x.envelope_v, x.cipher, x.key_id, x.blob,"
                " s.name, t.name, m.body, m.at,"
                " EXISTS (SELECT 1 FROM message_reads AS d"
                "         WHERE d.reader_pk = m.recipient_pk AND d.msg_seq = m.seq)"
                " OR coalesce((SELECT f.local_position FROM read_frontiers AS f"
                "              WHERE f.member_pk = m.recipient_pk), 0) >= m.seq"
                f" FROM {source_table} AS x JOIN messages AS m ON m.seq = {position}"
                " JOIN members AS s ON s.member_pk = m.sender_pk"
                " JOIN members AS t ON t.member_pk = m.recipient_pk"
                f" WHERE x.binding_pk = ? AND {condition} AND x.wire_id IN ({marks})",
                (binding_pk, *part),
            ):
                found[str(r[0])] = SeededMessage(
                    str(r[0]),
                    int(r[1]),
                    (int(r[2]), str(r[3]), r[4], str(r[5])),
                    str(r[6]),
                    str(r[7]),
                    str(r[8]),
                    str(r[9]),
                    bool(r[10]),
                )
    return found


def held_wire_ids(conn: apsw.Connection, key: BindingKey) -> list[str]:
    """The wire IDs this binding holds in a seedable status (oldest first)."""
    binding = load_binding(conn, key)
    if binding is None:
        return []
    marks = ", ".join(f"'{s}'" for s in SEEDABLE_STATUSES)
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT wire_id FROM sync_quarantine WHERE binding_pk = ?"
            f" AND status IN ({marks}) ORDER BY server_seq",
            (binding.pk,),
        )
    ]


def seed_history(
    conn: apsw.Connection, path: Path, key: BindingKey, backup: dict[str, SeededMessage], now: str
) -> SeedResult:
    """Seed every held row of ``key``'s binding that ``backup`` (from
    :func:`read_backup`) maps, in one transaction (crash point ``seed.commit``).

    Raises :class:`InvalidInput` — and writes nothing — when the backup maps
    a held wire ID to another sequence or another envelope than this store
    pulled, or when the team is not connected here."""
    marks = ", ".join(f"'{s}'" for s in SEEDABLE_STATUSES)
    with sync_transaction(conn, path, "seed.commit"):
        binding = load_binding(conn, key)
        if binding is None:
            raise InvalidInput(
                "--team",
                f"team {key.local_team!r} has pulled nothing from this relay team yet; run "
                "'syncengine sync' first, then seed",
            )
        held: list[Row] = conn.execute(
            "SELECT wire_id, server_seq, envelope_v, cipher, key_id, blob FROM sync_quarantine"
            f" WHERE binding_pk = ? AND status IN ({marks}) ORDER BY server_seq",
            (binding.pk,),
        ).fetchall()
        chosen: list[SeededMessage] = []
        for wire_id, server_seq, v, cipher, key_id, blob in held:
            message = backup.get(wire_id)
            if message is None:
                continue
            if message.server_seq != server_seq or message.envelope != (v, cipher, key_id, blob):
                raise InvalidInput(
                    "--input",
                    f"the backup holds wire ID {wire_id} with another sequence or envelope than "
                    f"this machine pulled at server_seq {server_seq}; it is not a backup of this "
                    "team's stream as the relay serves it (nothing was seeded)",
                )
            chosen.append(message)
        if not chosen:
            return SeedResult(0, 0, len(held))
        positions = import_projected_sent(
            conn,
            key.local_team,
            [
                (local_id, m.sender, m.recipient, m.body, m.created_at, f"seeded {m.wire_id}")
                for m, local_id in zip(chosen, new_uuid7s(len(chosen)), strict=True)
            ],
            now,
        )
        conn.executemany(
            "UPDATE sync_quarantine SET status = 'imported', local_position = ?, reason = NULL"
            f" WHERE binding_pk = ? AND wire_id = ? AND status IN ({marks})",
            [(p, binding.pk, m.wire_id) for m, p in zip(chosen, positions, strict=True)],
        )
        read = [p for m, p in zip(chosen, positions, strict=True) if m.read]
        _mark_read(conn, binding.team_pk, read, now)
        read_overlay.on_mappings(
            conn,
            binding.pk,
            [(m.wire_id, m.server_seq, p) for m, p in zip(chosen, positions, strict=True)],
            now,
        )
    return SeedResult(len(chosen), len(read), len(held) - len(chosen))


def _mark_read(conn: apsw.Connection, team_pk: int, positions: Sequence[int], now: str) -> None:
    """A local read by each message's recipient (the backup's read state of
    those messages), then the readers' frontiers compacted."""
    if not positions:
        return
    readers: dict[int, int] = {}
    for part in [positions[i : i + _IN_CHUNK] for i in range(0, len(positions), _IN_CHUNK)]:
        marks = ",".join("?" * len(part))
        readers.update(
            (int(seq), int(reader))
            for seq, reader in conn.execute(
                f"SELECT seq, recipient_pk FROM messages WHERE seq IN ({marks})", tuple(part)
            )
        )
    at = log_tip(conn)
    conn.executemany(
        "INSERT INTO message_reads (id, team_pk, reader_pk, msg_seq, msg_id, at, log_position)"
        " VALUES (?, ?, ?, ?, NULL, ?, ?)",
        [
            (event_id, team_pk, readers[seq], seq, now, at)
            for seq, event_id in zip(positions, new_uuid7s(len(positions)), strict=True)
        ],
    )
    read_overlay.compact_readers(conn, set(readers.values()))
