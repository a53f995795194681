"""Versioned, forward-only schema migrations (specs/store.md §2).

The schema version is SQLite's ``user_version``. Each migration runs in its
own ``BEGIN IMMEDIATE`` transaction together with the bump of
``user_version``, so a crash leaves the store at exactly one known version
and a concurrent opener either sees the old or the new schema. A store whose
version is newer than :data:`LATEST_VERSION` is refused, never downgraded.

Tables are ``STRICT`` and keyed by integer surrogates so renames touch one
row. Migration 3 adds the Stage-1 sync tables (bindings, wire-ID
reservations with their acknowledgements, the pull quarantine and the
conflict audit; specs/sync-stage1.md §2); the ``messages.origin`` column
distinguishes local writes from imports.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from syncengine.crash import crash_point
from syncengine.ids import new_uuid4
from syncengine.store.connection import all_rows, write_transaction
from syncengine.store.errors import CorruptStore, StoreError, StoreTooNew
from syncengine.store.reserved_names import RESERVED_NAMES_TABLE, seed_from_history

if TYPE_CHECKING:
    import apsw

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "REQUIRED_TABLES",
    "migrate",
    "missing_tables",
    "schema_version",
]


def _v1_registry(conn: apsw.Connection) -> None:
    """Store metadata (with the driver generation) and the team registry."""
    conn.execute(
        """
        CREATE TABLE store_meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) STRICT;
        CREATE TABLE teams (
            team_pk    INTEGER PRIMARY KEY,
            team_id    TEXT NOT NULL UNIQUE,
            name       TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        ) STRICT;
        CREATE TABLE members (
            member_pk  INTEGER PRIMARY KEY,
            team_pk    INTEGER NOT NULL REFERENCES teams (team_pk),
            member_id  TEXT NOT NULL UNIQUE,
            name       TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (team_pk, name)
        ) STRICT;
        """
    )
    # Minted exactly once per store file: a rebuilt store is a new generation.
    conn.execute(
        "INSERT INTO store_meta (key, value) VALUES ('driver_generation', ?)", (new_uuid4(),)
    )


def _v2_message_log(conn: apsw.Connection) -> None:
    """The message log, exact read events and per-member local frontiers."""
    conn.execute(
        """
        CREATE TABLE messages (
            seq          INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL,
            team_pk      INTEGER NOT NULL REFERENCES teams (team_pk),
            sender_pk    INTEGER NOT NULL REFERENCES members (member_pk),
            recipient_pk INTEGER NOT NULL REFERENCES members (member_pk),
            body         TEXT NOT NULL,
            at           TEXT NOT NULL,
            origin       TEXT NOT NULL CHECK (origin IN ('local', 'imported')),
            UNIQUE (team_pk, id)
        ) STRICT;
        CREATE INDEX messages_by_team ON messages (team_pk, seq);
        CREATE INDEX messages_by_sender ON messages (sender_pk, seq);
        CREATE INDEX messages_by_recipient ON messages (recipient_pk, seq);
        CREATE TABLE message_reads (
            read_seq     INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL UNIQUE,
            msg_seq      INTEGER NOT NULL REFERENCES messages (seq),
            reader_pk    INTEGER NOT NULL REFERENCES members (member_pk),
            at           TEXT NOT NULL,
            log_position INTEGER NOT NULL
        ) STRICT;
        CREATE INDEX message_reads_by_reader ON message_reads (reader_pk, msg_seq);
        CREATE TABLE read_frontiers (
            member_pk      INTEGER PRIMARY KEY REFERENCES members (member_pk),
            local_position INTEGER NOT NULL CHECK (local_position >= 0)
        ) STRICT;
        """
    )


_BLOCKING_STATES = (
    "'unsupported_cipher', 'pending_key', 'authentication_failed', 'malformed', 'policy_violation'"
)


def _v3_sync_stage1(conn: apsw.Connection) -> None:
    """Stage-1 message sync (specs/sync-stage1.md §2): bindings, push
    reservations, the pull quarantine and the durable conflict audit.

    Every sequence and cursor is an INTEGER here and a canonical decimal
    string only on the wire. The partial indexes are what keep the hot paths
    proportional to the page: the first unacknowledged position (reconcile's
    push cursor, agmsg #912), the blocking keyset (reprocess) and the next
    local-origin positions of a team (prepare; imports are never candidates,
    agmsg #949).
    """
    conn.execute(
        f"""
        CREATE TABLE sync_bindings (
            binding_pk         INTEGER PRIMARY KEY,
            team_pk            INTEGER NOT NULL REFERENCES teams (team_pk),
            server_instance_id TEXT NOT NULL,
            remote_team_id     TEXT NOT NULL,
            protocol_version   INTEGER NOT NULL,
            driver_generation  TEXT NOT NULL,
            state              TEXT NOT NULL CHECK (state IN ('active', 'retired')),
            revision           INTEGER NOT NULL CHECK (revision >= 1),
            push_cursor        INTEGER NOT NULL DEFAULT 0 CHECK (push_cursor >= 0),
            transport_cursor   INTEGER NOT NULL DEFAULT 0 CHECK (transport_cursor >= 0),
            corrupt_count      INTEGER NOT NULL DEFAULT 0 CHECK (corrupt_count >= 0),
            created_at         TEXT NOT NULL,
            UNIQUE (server_instance_id, remote_team_id, protocol_version)
        ) STRICT;
        CREATE INDEX sync_bindings_by_team ON sync_bindings (team_pk);
        CREATE TABLE sync_push (
            binding_pk     INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            local_position INTEGER NOT NULL REFERENCES messages (seq),
            state          TEXT NOT NULL CHECK (state IN ('reserved', 'acked', 'blocked')),
            wire_id        TEXT,
            envelope_v     INTEGER,
            cipher         TEXT,
            key_id         TEXT,
            blob           TEXT,
            server_seq     INTEGER CHECK (server_seq >= 1),
            blocked_limit  INTEGER,
            blocked_reason TEXT,
            PRIMARY KEY (binding_pk, local_position),
            UNIQUE (binding_pk, wire_id),
            UNIQUE (binding_pk, server_seq),
            CHECK ((state = 'blocked') = (wire_id IS NULL)),
            CHECK ((state = 'acked') = (server_seq IS NOT NULL)),
            CHECK ((state = 'blocked') = (blocked_limit IS NOT NULL)),
            CHECK (wire_id IS NULL
                   OR (envelope_v IS NOT NULL AND cipher IS NOT NULL AND blob IS NOT NULL))
        ) STRICT;
        CREATE INDEX sync_push_open ON sync_push (binding_pk, local_position)
            WHERE state != 'acked';
        CREATE INDEX sync_push_blocked ON sync_push (binding_pk, blocked_limit)
            WHERE state = 'blocked';
        CREATE TABLE sync_quarantine (
            binding_pk              INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            wire_id                 TEXT NOT NULL,
            server_seq              INTEGER NOT NULL CHECK (server_seq >= 1),
            server_received_at      TEXT NOT NULL,
            envelope_v              INTEGER NOT NULL,
            cipher                  TEXT NOT NULL,
            key_id                  TEXT,
            blob                    TEXT NOT NULL,
            status                  TEXT NOT NULL CHECK (status IN (
                'imported', 'reconciled', 'corrupt_state', {_BLOCKING_STATES})),
            policy_revision         INTEGER NOT NULL CHECK (policy_revision >= 0),
            local_security_revision INTEGER NOT NULL CHECK (local_security_revision >= 0),
            reason                  TEXT,
            local_position          INTEGER REFERENCES messages (seq),
            PRIMARY KEY (binding_pk, wire_id),
            UNIQUE (binding_pk, server_seq)
        ) STRICT;
        CREATE INDEX sync_quarantine_blocking ON sync_quarantine (binding_pk, server_seq, wire_id)
            WHERE status IN ({_BLOCKING_STATES});
        CREATE TABLE sync_conflicts (
            conflict_pk     INTEGER PRIMARY KEY AUTOINCREMENT,
            binding_pk      INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            kind            TEXT NOT NULL CHECK (kind IN (
                'ack_sequence_conflict', 'ack_wire_conflict',
                'wire_envelope_mismatch', 'sequence_wire_conflict')),
            wire_id         TEXT NOT NULL,
            server_seq      INTEGER NOT NULL,
            envelope_digest TEXT NOT NULL,
            reason          TEXT NOT NULL,
            recorded_at     TEXT NOT NULL,
            UNIQUE (binding_pk, kind, wire_id, server_seq, envelope_digest)
        ) STRICT;
        CREATE INDEX messages_local_by_team ON messages (team_pk, seq) WHERE origin = 'local';
        """
    )


_ENGINE_STATES = (
    "'connected', 'ok', 'backoff', 'adjust', 'refused', 'resync-required', "
    "'writes-stopped', 'halted'"
)


def _v4_engine_state(conn: apsw.Connection) -> None:
    """Durable sync-engine state (specs/engine.md §2.3).

    ``engine_bindings`` is the non-secret connection of one local team to
    one Stage-1 binding: endpoint, credential file *path* and ID (never the
    secret), the age-v1 epoch manifest and identity file *path*.
    ``engine_security_history`` is the append-only local security history
    of server/spec/v1.md "GET /v1/capabilities" (revision 0 from sequence 1
    is written by connect). ``engine_status`` is what ``status`` shows: the
    outcome of the last cycle, last success and failure with the operator's
    remedy, and the durable resync-required marker (a 410 is never
    forgotten by a restart).
    """
    conn.execute(
        f"""
        CREATE TABLE engine_bindings (
            binding_pk       INTEGER PRIMARY KEY REFERENCES sync_bindings (binding_pk),
            team_pk          INTEGER NOT NULL UNIQUE REFERENCES teams (team_pk),
            endpoint         TEXT NOT NULL,
            remote_team_name TEXT NOT NULL,
            credential_id    TEXT NOT NULL,
            credential_path  TEXT NOT NULL,
            age_key_id       TEXT,
            age_recipients   TEXT,
            identity_path    TEXT,
            connected_at     TEXT NOT NULL,
            CHECK ((age_key_id IS NULL) = (age_recipients IS NULL)),
            CHECK (identity_path IS NULL OR age_key_id IS NOT NULL)
        ) STRICT;
        CREATE TABLE engine_security_history (
            binding_pk            INTEGER NOT NULL REFERENCES engine_bindings (binding_pk),
            revision              INTEGER NOT NULL CHECK (revision >= 0),
            effective_from_seq    INTEGER NOT NULL CHECK (effective_from_seq >= 1),
            minimum_security_mode TEXT NOT NULL
                CHECK (minimum_security_mode IN ('plaintext-allowed', 'e2ee-required')),
            recorded_at           TEXT NOT NULL,
            PRIMARY KEY (binding_pk, revision)
        ) STRICT;
        CREATE TABLE engine_status (
            binding_pk               INTEGER PRIMARY KEY REFERENCES engine_bindings (binding_pk),
            state                    TEXT NOT NULL CHECK (state IN ({_ENGINE_STATES})),
            last_success_at          TEXT,
            last_failure_at          TEXT,
            failures_since_success   INTEGER NOT NULL DEFAULT 0
                CHECK (failures_since_success >= 0),
            last_error_code          TEXT,
            last_error_class         TEXT,
            last_error_http_status   INTEGER,
            last_error_message       TEXT,
            last_error_remediation   TEXT,
            resync_after             INTEGER,
            resync_min_available_seq INTEGER,
            resync_recorded_at       TEXT,
            CHECK ((resync_after IS NULL) = (resync_min_available_seq IS NULL))
        ) STRICT;
        """
    )


def _v5_messages_only_axis(conn: apsw.Connection) -> None:
    """The storage axis is messages only (driver-interface §2 intro; specs/store.md §4).

    A host never registers teams or agents with its storage driver, so names
    are interned on first use. ``teams.registered`` and ``members.roster``
    tell the sync layer's roster (``team create``/``add-member``, the relay's
    ``GET /v1/members``) apart from names merely seen on messages; rows that
    existed before this migration were all created through the registry.

    ``message_reads`` is rebuilt so a read mark is scoped to the marking
    (team, agent) alone: it may name a message addressed to someone else
    (``msg_seq`` set, affecting nobody) or an ID this store does not hold
    (``msg_id`` set instead), exactly as the bundled driver records them.
    """
    conn.execute(
        """
        ALTER TABLE teams ADD COLUMN registered INTEGER NOT NULL DEFAULT 1
            CHECK (registered IN (0, 1));
        ALTER TABLE members ADD COLUMN roster INTEGER NOT NULL DEFAULT 1
            CHECK (roster IN (0, 1));
        CREATE TABLE message_reads_v5 (
            read_seq     INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL UNIQUE,
            team_pk      INTEGER NOT NULL REFERENCES teams (team_pk),
            reader_pk    INTEGER NOT NULL REFERENCES members (member_pk),
            msg_seq      INTEGER REFERENCES messages (seq),
            msg_id       TEXT,
            at           TEXT NOT NULL,
            log_position INTEGER NOT NULL,
            CHECK ((msg_seq IS NULL) = (msg_id IS NOT NULL))
        ) STRICT;
        INSERT INTO message_reads_v5
            (read_seq, id, team_pk, reader_pk, msg_seq, msg_id, at, log_position)
            SELECT x.read_seq, x.id, m.team_pk, x.reader_pk, x.msg_seq, NULL, x.at,
                   x.log_position
            FROM message_reads AS x JOIN messages AS m ON m.seq = x.msg_seq;
        DROP TABLE message_reads;
        ALTER TABLE message_reads_v5 RENAME TO message_reads;
        CREATE INDEX message_reads_by_reader ON message_reads (reader_pk, msg_seq);
        CREATE INDEX message_reads_dangling ON message_reads (team_pk, msg_id)
            WHERE msg_id IS NOT NULL;
        """
    )


def _v6_resync_audits(conn: apsw.Connection) -> None:
    """The immutable audit of operator-accepted retention gaps
    (retention-gap-resynchronization.md "Driver transaction and audit
    record"; specs/sync-stage1.md §4.5).

    One row per binding, driver generation and accepted floor: the old
    cursor and the unavailable inclusive range ``gap_start..gap_end``. The
    CHECKs encode the sequence arithmetic, so a row that contradicts it can
    never be stored, and triggers refuse every UPDATE and DELETE: an
    accepted loss is never rewritten or forgotten.
    """
    conn.execute(
        """
        CREATE TABLE sync_resync_audits (
            binding_pk                INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            driver_generation         TEXT NOT NULL,
            accepted_floor            INTEGER NOT NULL,
            expected_transport_cursor INTEGER NOT NULL CHECK (expected_transport_cursor >= 0),
            gap_start                 INTEGER NOT NULL,
            gap_end                   INTEGER NOT NULL,
            current_seq               INTEGER NOT NULL,
            reason                    TEXT NOT NULL CHECK (reason = 'retention-gap-accepted'),
            accepted_at               TEXT NOT NULL,
            PRIMARY KEY (binding_pk, driver_generation, accepted_floor),
            CHECK (expected_transport_cursor < accepted_floor),
            CHECK (accepted_floor <= current_seq),
            CHECK (gap_start = expected_transport_cursor + 1),
            CHECK (gap_end = accepted_floor)
        ) STRICT, WITHOUT ROWID;
        CREATE TRIGGER sync_resync_audits_no_update BEFORE UPDATE ON sync_resync_audits
        BEGIN
            SELECT RAISE(ABORT, 'resync audit rows are immutable');
        END;
        CREATE TRIGGER sync_resync_audits_no_delete BEFORE DELETE ON sync_resync_audits
        BEGIN
            SELECT RAISE(ABORT, 'resync audit rows are immutable');
        END;
        """
    )


def _v7_remote_read_overlay(conn: apsw.Connection) -> None:
    """The remote read-state overlay of each binding (read-state-synchronization.md
    "Store-owned composite frontier"; specs/read-state.md §3).

    Keyed by binding and the relay's immutable member ID, separate from the
    local read layer (``message_reads``/``read_frontiers``), from transport
    progress and from quarantine:

    * ``sync_bindings.read_floor`` — the authenticated retention floor, the
      lower bound of every member's effective frontier;
    * ``read_remote_frontiers`` — each member's contiguous ``server_seq``
      prefix as the relay last reported it (max-merged);
    * ``read_remote_exact`` — exact reads by wire ID the relay reported,
      kept even before their message arrives;
    * ``read_outbox`` — local exact reads promoted to an acknowledged wire ID
      and sequence, waiting to be uploaded;
    * ``read_blocks`` — members excluded from read-state mutations, and why;
    * ``members.relay_bound`` — the member ID came from the relay's roster, so
      the name is that member's for good (never rebound to another member).
    """
    conn.execute(
        """
        ALTER TABLE sync_bindings ADD COLUMN read_floor INTEGER NOT NULL DEFAULT 0
            CHECK (read_floor >= 0);
        CREATE TABLE read_remote_frontiers (
            binding_pk INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            member_id  TEXT NOT NULL,
            server_seq INTEGER NOT NULL CHECK (server_seq >= 0),
            PRIMARY KEY (binding_pk, member_id)
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE read_remote_exact (
            binding_pk INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            member_id  TEXT NOT NULL,
            wire_id    TEXT NOT NULL,
            PRIMARY KEY (binding_pk, member_id, wire_id)
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE read_outbox (
            binding_pk INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            member_id  TEXT NOT NULL,
            wire_id    TEXT NOT NULL,
            server_seq INTEGER NOT NULL CHECK (server_seq >= 1),
            PRIMARY KEY (binding_pk, member_id, wire_id)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX read_outbox_by_seq ON read_outbox (binding_pk, member_id, server_seq);
        CREATE TABLE read_blocks (
            binding_pk INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            member_id  TEXT NOT NULL,
            reason     TEXT NOT NULL CHECK (reason IN (
                'member-name-mismatch', 'read-state-limit-exceeded')),
            detail     TEXT NOT NULL,
            blocked_at TEXT NOT NULL,
            PRIMARY KEY (binding_pk, member_id)
        ) STRICT, WITHOUT ROWID;
        CREATE INDEX sync_quarantine_by_local ON sync_quarantine (binding_pk, local_position)
            WHERE local_position IS NOT NULL;
        CREATE INDEX sync_quarantine_corrupt ON sync_quarantine (binding_pk, server_seq)
            WHERE status = 'corrupt_state';
        CREATE INDEX members_roster ON members (team_pk, member_id) WHERE roster = 1;
        ALTER TABLE members ADD COLUMN relay_bound INTEGER NOT NULL DEFAULT 0
            CHECK (relay_bound IN (0, 1));
        UPDATE members SET relay_bound = 1
            WHERE roster = 1 AND team_pk IN (SELECT team_pk FROM engine_bindings);
        """
    )


def _v8_seen_relay_state(conn: apsw.Connection) -> None:
    """The newest authenticated relay state each binding has seen (issue #14):
    a later snapshot whose floor or ``current_seq`` is lower contradicts it,
    and the engine halts instead of acting on it; and the durable
    integrity-halt marker (``halt_*``) that keeps a binding stopped until an
    operator runs ``syncengine resume`` (specs/engine.md §9)."""
    conn.execute(
        """
        ALTER TABLE engine_status ADD COLUMN seen_floor INTEGER NOT NULL DEFAULT 0
            CHECK (seen_floor >= 0);
        ALTER TABLE engine_status ADD COLUMN seen_current_seq INTEGER NOT NULL DEFAULT 0
            CHECK (seen_current_seq >= 0);
        ALTER TABLE engine_status ADD COLUMN halt_code TEXT;
        ALTER TABLE engine_status ADD COLUMN halt_message TEXT;
        ALTER TABLE engine_status ADD COLUMN halt_at TEXT;
        """
    )


def _v9_envelope_heads(conn: apsw.Connection) -> None:
    """Find a sealed envelope by its content (issue #14): a relay that
    re-serves an age-v1 envelope this binding already holds under another
    wire ID is replaying it — random file keys make two genuine seals of
    one message differ — and must not become a second copy of the message.
    The head of the blob (the age header with its ephemeral share) is
    indexed instead of the up-to-1-MiB blob; candidates are compared whole.
    Plaintext (``none``) is left out: identical messages sent within one
    timestamp are legitimately identical envelopes."""
    conn.execute(
        """
        CREATE INDEX sync_quarantine_by_envelope_head
            ON sync_quarantine (binding_pk, substr(blob, 1, 160)) WHERE cipher <> 'none';
        CREATE INDEX sync_push_by_envelope_head
            ON sync_push (binding_pk, substr(blob, 1, 160)) WHERE cipher <> 'none';
        """
    )


def _v10_restore_adoption(conn: apsw.Connection) -> None:
    """``sync_bindings.adopt_own``: the binding may hold local messages the
    relay already has from before a restore (syncengine/ops/adopt.py); set in
    every backup file, cleared once a pull reached the relay's head."""
    conn.execute(
        "ALTER TABLE sync_bindings ADD COLUMN adopt_own INTEGER NOT NULL DEFAULT 0"
        " CHECK (adopt_own IN (0, 1))"
    )


def _v11_key_epochs(conn: apsw.Connection) -> None:
    """``engine_key_epochs``: the sequence-effective key-epoch history of each
    connection (docs/spec/age-v1-profile.md "Recipient-set epochs";
    syncengine/engine/epochs.py). The one epoch ``engine_bindings`` held
    becomes revision 0 from sequence 1, and those columns are cleared: the
    history is the only place an epoch lives. Triggers keep it append-only —
    only a row's identity *path* (this machine's, not the team's) may change.
    """
    conn.execute(
        """
        CREATE TABLE engine_key_epochs (
            binding_pk         INTEGER NOT NULL REFERENCES engine_bindings (binding_pk),
            revision           INTEGER NOT NULL CHECK (revision >= 0),
            effective_from_seq INTEGER NOT NULL CHECK (effective_from_seq >= 1),
            key_id             TEXT NOT NULL,
            recipients         TEXT NOT NULL CHECK (recipients != ''),
            identity_path      TEXT,
            recorded_at        TEXT NOT NULL,
            PRIMARY KEY (binding_pk, revision),
            UNIQUE (binding_pk, key_id),
            CHECK (revision > 0 OR effective_from_seq = 1)
        ) STRICT;
        CREATE TRIGGER engine_key_epochs_immutable
            BEFORE UPDATE OF binding_pk, revision, effective_from_seq, key_id, recipients
            ON engine_key_epochs
            BEGIN SELECT RAISE(ABORT, 'key epochs are append-only'); END;
        INSERT INTO engine_key_epochs
            (binding_pk, revision, effective_from_seq, key_id, recipients, identity_path,
             recorded_at)
            SELECT binding_pk, 0, 1, age_key_id, age_recipients, identity_path, connected_at
            FROM engine_bindings WHERE age_key_id IS NOT NULL;
        UPDATE engine_bindings SET age_key_id = NULL, age_recipients = NULL,
            identity_path = NULL;
        """
    )


def _v12_adoptable_imports(conn: apsw.Connection) -> None:
    """``sync_adoptable``: messages a *new* binding of a team already holds
    from an earlier one (a relay rebuilt from nothing), by a digest of their
    four plaintext fields (syncengine/ops/adopt.py). When another machine
    re-publishes one of them to the new relay, apply records the pulled
    envelope as imported *onto* the held message instead of importing it a
    second time, and the row goes. Keyed by digest, so the lookup costs one
    index probe per pulled message, and nothing for bindings without rows.
    """
    conn.execute(
        """
        CREATE TABLE sync_adoptable (
            binding_pk     INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            local_position INTEGER NOT NULL REFERENCES messages (seq),
            content_digest BLOB NOT NULL CHECK (length(content_digest) = 32),
            PRIMARY KEY (binding_pk, local_position)
        ) STRICT;
        CREATE INDEX sync_adoptable_by_digest ON sync_adoptable (binding_pk, content_digest);
        """
    )


def _v13_history_counts(conn: apsw.Connection) -> None:
    """``sync_history_counts``: per binding, its reservations, quarantine rows
    and ``reconciled`` quarantine rows, kept by the statements that write
    them (syncengine/ops/history_counts.py), so ``status`` need not count the
    history (issue #17). Counted here once from the rows already there."""
    conn.execute(
        """
        CREATE TABLE sync_history_counts (
            binding_pk      INTEGER PRIMARY KEY REFERENCES sync_bindings (binding_pk),
            push_rows       INTEGER NOT NULL CHECK (push_rows >= 0),
            quarantine_rows INTEGER NOT NULL CHECK (quarantine_rows >= 0),
            reconciled_rows INTEGER NOT NULL CHECK (reconciled_rows >= 0)
        ) STRICT;
        INSERT INTO sync_history_counts (binding_pk, push_rows, quarantine_rows, reconciled_rows)
            SELECT b.binding_pk,
                   (SELECT count(*) FROM sync_push WHERE binding_pk = b.binding_pk),
                   (SELECT count(*) FROM sync_quarantine WHERE binding_pk = b.binding_pk),
                   (SELECT count(*) FROM sync_quarantine
                    WHERE binding_pk = b.binding_pk AND status = 'reconciled')
            FROM sync_bindings AS b;
        """
    )


def _v14_quarantine_outcomes(conn: apsw.Connection) -> None:
    """Two more held quarantine states (issues #33, #34; wire/block_states.py):
    ``manifest_mismatch`` (blocking: the age header contradicts the epoch
    manifest it claims) and ``before_join`` (settled: sealed for an epoch
    this machine was never a recipient of).

    SQLite cannot widen a CHECK in place, so ``sync_quarantine`` is rebuilt
    (the documented create-copy-drop-rename) with the wider CHECK and every
    index it had; the held-states partial index now lists all seven, in
    ``BlockState`` order — the queries that name it spell the same list.
    Rows are copied with their rowids, as they are; no status
    changes (``reprocess`` re-judges an old ``pending_key`` as
    ``before_join`` where that is what it is)."""
    held = (
        "'unsupported_cipher', 'pending_key', 'authentication_failed', 'malformed',"
        " 'policy_violation', 'manifest_mismatch', 'before_join'"
    )
    conn.execute(
        f"""
        CREATE TABLE sync_quarantine_v14 (
            binding_pk              INTEGER NOT NULL REFERENCES sync_bindings (binding_pk),
            wire_id                 TEXT NOT NULL,
            server_seq              INTEGER NOT NULL CHECK (server_seq >= 1),
            server_received_at      TEXT NOT NULL,
            envelope_v              INTEGER NOT NULL,
            cipher                  TEXT NOT NULL,
            key_id                  TEXT,
            blob                    TEXT NOT NULL,
            status                  TEXT NOT NULL CHECK (status IN (
                'imported', 'reconciled', 'corrupt_state', {held})),
            policy_revision         INTEGER NOT NULL CHECK (policy_revision >= 0),
            local_security_revision INTEGER NOT NULL CHECK (local_security_revision >= 0),
            reason                  TEXT,
            local_position          INTEGER REFERENCES messages (seq),
            PRIMARY KEY (binding_pk, wire_id),
            UNIQUE (binding_pk, server_seq)
        ) STRICT;
        INSERT INTO sync_quarantine_v14 (rowid, binding_pk, wire_id, server_seq,
            server_received_at, envelope_v, cipher, key_id, blob, status, policy_revision,
            local_security_revision, reason, local_position)
            SELECT rowid, binding_pk, wire_id, server_seq, server_received_at, envelope_v,
            cipher, key_id, blob, status, policy_revision, local_security_revision, reason,
            local_position FROM sync_quarantine ORDER BY rowid;
        DROP TABLE sync_quarantine;
        ALTER TABLE sync_quarantine_v14 RENAME TO sync_quarantine;
        CREATE INDEX sync_quarantine_blocking ON sync_quarantine (binding_pk, server_seq, wire_id)
            WHERE status IN ({held});
        CREATE INDEX sync_quarantine_by_local ON sync_quarantine (binding_pk, local_position)
            WHERE local_position IS NOT NULL;
        CREATE INDEX sync_quarantine_corrupt ON sync_quarantine (binding_pk, server_seq)
            WHERE status = 'corrupt_state';
        CREATE INDEX sync_quarantine_by_envelope_head
            ON sync_quarantine (binding_pk, substr(blob, 1, 160)) WHERE cipher <> 'none';
        """
    )

    # The table is rebuilt, its old copy dropped, nothing committed yet
    # (crash_tests/test_quarantine_migration_crash_point.py).
    crash_point("store.migrate.quarantine_outcomes")


def _v15_epoch_checkpoints(conn: apsw.Connection) -> None:
    """``engine_epoch_checkpoints``: per Stage-1 binding, the latest epoch
    snapshot this machine accepted or issued — its revision, SHA-256, writer
    generation and canonical bytes (docs/spec/age-v1-profile.md "Epoch
    snapshots and rollback resistance"; syncengine/engine/epoch_checkpoint.py).
    Keyed by the Stage-1 binding, not the connection, so ``disconnect`` does
    not reset it. A trigger refuses an update that lowers the revision or the
    generation, or changes the digest at the same revision.

    A binding that already holds key epochs gets a **legacy** checkpoint:
    revision 0, generation 0, no digest and no bytes — anchored by the
    epochs it holds, the rule snapshots were judged by before the chain
    (specs/age-v1.md "Epoch authority", "Stores and files from before the
    chain").
    """
    conn.execute(
        """
        CREATE TABLE engine_epoch_checkpoints (
            binding_pk        INTEGER PRIMARY KEY REFERENCES sync_bindings (binding_pk),
            epoch_revision    INTEGER NOT NULL CHECK (epoch_revision >= 0),
            snapshot_sha256   TEXT CHECK (snapshot_sha256 IS NULL OR length(snapshot_sha256) = 64),
            writer_generation INTEGER NOT NULL CHECK (writer_generation >= 0),
            snapshot          BLOB,
            recorded_at       TEXT NOT NULL,
            CHECK ((snapshot_sha256 IS NULL) = (snapshot IS NULL))
        ) STRICT;
        CREATE TRIGGER engine_epoch_checkpoints_forward
            BEFORE UPDATE ON engine_epoch_checkpoints
            WHEN NEW.epoch_revision < OLD.epoch_revision
              OR NEW.writer_generation < OLD.writer_generation
              OR (NEW.epoch_revision = OLD.epoch_revision
                  AND OLD.snapshot_sha256 IS NOT NULL
                  AND NEW.snapshot_sha256 IS NOT OLD.snapshot_sha256)
            BEGIN SELECT RAISE(ABORT, 'an epoch checkpoint only moves forward'); END;
        INSERT INTO engine_epoch_checkpoints
            (binding_pk, epoch_revision, snapshot_sha256, writer_generation, snapshot,
             recorded_at)
            SELECT binding_pk, 0, NULL, 0, NULL, max(recorded_at)
            FROM engine_key_epochs GROUP BY binding_pk;
        """
    )


def _v16_reserved_names(conn: apsw.Connection) -> None:
    """Member names renamed away, kept reserved for their team (issue #34;
    specs/store.md §4.1): the table, seeded from the former names the
    store's plaintext envelopes still prove (``seed_from_history``)."""
    conn.execute(RESERVED_NAMES_TABLE)
    seed_from_history(conn)


#: Migration ``i`` takes the schema from version ``i`` to ``i + 1``.
MIGRATIONS: tuple[Callable[[apsw.Connection], None], ...] = (
    _v1_registry,
    _v2_message_log,
    _v3_sync_stage1,
    _v4_engine_state,
    _v5_messages_only_axis,
    _v6_resync_audits,
    _v7_remote_read_overlay,
    _v8_seen_relay_state,
    _v9_envelope_heads,
    _v10_restore_adoption,
    _v11_key_epochs,
    _v12_adoptable_imports,
    _v13_history_counts,
    _v14_quarantine_outcomes,
    _v15_epoch_checkpoints,
    _v16_reserved_names,
)
LATEST_VERSION = len(MIGRATIONS)

#: Every table the latest schema holds; a store missing one is damaged.
REQUIRED_TABLES = frozenset(
    {
        "store_meta",
        "teams",
        "members",
        "messages",
        "message_reads",
        "read_frontiers",
        "sync_bindings",
        "sync_push",
        "sync_quarantine",
        "sync_conflicts",
        "sync_history_counts",
        "sync_resync_audits",
        "read_remote_frontiers",
        "read_remote_exact",
        "read_outbox",
        "read_blocks",
        "engine_bindings",
        "engine_security_history",
        "engine_status",
        "engine_epoch_checkpoints",
        "reserved_names",
    }
)


def missing_tables(conn: apsw.Connection) -> list[str]:
    """The required tables a store at the latest version lacks (one
    ``sqlite_master`` scan: a dropped table must fail every operation as
    damage, never let a read answer "nothing")."""
    present = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    return sorted(REQUIRED_TABLES - present)


def schema_version(conn: apsw.Connection) -> int:
    version: int = all_rows(conn.execute("PRAGMA user_version"))[0][0]
    return version


def migrate(conn: apsw.Connection, path: Path, target: int = LATEST_VERSION) -> int:
    """Apply every pending migration up to ``target``; returns the new version."""
    current = schema_version(conn)
    if current > LATEST_VERSION:
        raise StoreTooNew(
            f"store {path} has schema version {current}, newer than this syncengine "
            f"supports ({LATEST_VERSION}); upgrade syncengine"
        )
    while current < target:
        with write_transaction(conn, path):
            # Re-read under the write lock: another process may have migrated.
            current = schema_version(conn)
            if current >= target:
                break
            try:
                MIGRATIONS[current](conn)
            except StoreError:
                raise
            except Exception as exc:
                import apsw  # loaded already: the connection is apsw's

                if not isinstance(exc, apsw.SQLError):
                    raise
                # A migration only fails on a schema that is not the one its
                # version number says (a hand-set ``user_version``, a damaged
                # file): the transaction rolls back and the store is refused
                # as damaged, naming the mismatch (issue #33).
                raise CorruptStore(
                    f"store {path} says schema version {current}, but its tables do not "
                    f"match that version ({exc}); it was changed outside syncengine: "
                    "restore it from a backup ('syncengine restore')"
                ) from None
            conn.execute(f"PRAGMA user_version = {current + 1}")
        current = schema_version(conn)
    return current
