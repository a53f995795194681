"""Named crash points at every storage-transaction boundary (specs/sync-stage1.md §6).

Crash safety is argued transition by transition: each sync state change is
one storage transaction, and each transaction boundary has a name. Setting
``SYNCENGINE_CRASH_AT=<name>`` makes the process die with :func:`os._exit`
(no ``finally`` blocks, no flush of buffered output, no rollback other than
the one SQLite performs on the next open) exactly at that point, so
``crash_tests/`` can prove that recovery converges from every boundary.

The variable is read once, at import; when it is unset :func:`crash_point`
is a comparison against ``None`` and nothing else. Every name that code may
pass is listed in :data:`CRASH_POINTS`, so a typo is an error in tests
rather than a crash point that silently never fires.
"""

from __future__ import annotations

import os

__all__ = [
    "CHECKPOINT_CRASH_POINTS",
    "CRASH_EXIT_CODE",
    "CRASH_POINTS",
    "ENGINE_CRASH_POINTS",
    "NAME_CRASH_POINTS",
    "OUTCOME_CRASH_POINTS",
    "RESTORE_CRASH_POINTS",
    "SEED_CRASH_POINTS",
    "STAGE1_CRASH_POINTS",
    "STAGE2_CRASH_POINTS",
    "STORE_CRASH_POINTS",
    "armed_point",
    "crash_point",
]

#: Exit status of an injected crash (distinct from every driver status code).
CRASH_EXIT_CODE = 77

#: The Stage-1 operations' crash points, in the order an operation passes them
#: (proven by crash_tests/test_sync_crash_points.py).
STAGE1_CRASH_POINTS: tuple[str, ...] = (
    # prepare_push: open the binding and take the work list (one transaction),
    # seal privately (no transaction), publish wire IDs + envelopes (one
    # transaction per chunk).
    "prepare.begin.before_commit",
    "prepare.begin.after_commit",
    "prepare.sealed",
    "prepare.publish.before_commit",
    "prepare.publish.after_commit",
    # reconcile_push: acknowledgements, conflicts and the push cursor.
    "reconcile.commit.before_commit",
    "reconcile.commit.after_commit",
    # apply_pull: quarantine, imports, echoes, conflicts and the transport cursor.
    "apply.commit.before_commit",
    "apply.commit.after_commit",
    # reprocess: a read snapshot only; the point exists to prove it writes nothing.
    "reprocess.snapshot.after_read",
    # resync: the accepted retention gap's audit row and the transport cursor.
    "resync.commit.before_commit",
    "resync.commit.after_commit",
    # explicit binding management.
    "binding.bind.before_commit",
    "binding.bind.after_commit",
    "binding.retire.before_commit",
    "binding.retire.after_commit",
)

#: The stage-2 read-state operations' crash points (specs/read-state.md §7;
#: proven by crash_tests/test_read_state_crash_points.py).
STAGE2_CRASH_POINTS: tuple[str, ...] = tuple(
    f"read.{name}.{when}_commit"
    for name in ("prepare", "apply", "block", "unblock")
    for when in ("before", "after")
)

#: The engine's own state transitions (specs/engine.md §2.5; proven
#: by crash_tests/test_engine_state_crash_points.py), in the order passed.
ENGINE_CRASH_POINTS: tuple[str, ...] = (
    # connect: the 0600 credential file is written (atomic rename) before its
    # one store transaction.
    "engine.connect.credential_written",
    "engine.connect.before_commit",
    "engine.connect.after_commit",
    # connect --replace: the new credential's own file, then one transaction
    # pointing the binding at it.
    "engine.reconnect.credential_written",
    "engine.reconnect.before_commit",
    "engine.reconnect.after_commit",
    # disconnect: the connection rows go in one transaction.
    "engine.disconnect.before_commit",
    "engine.disconnect.after_commit",
    # a restored store caught up with the relay: adoption ends
    # (syncengine/ops/adopt.py; crash-tested in tests/e2e/test_backup_restore.py).
    "engine.adopted.before_commit",
    "engine.adopted.after_commit",
    # the outcome of push/pull/sync/reprocess recorded in engine_status.
    "engine.record.before_commit",
    "engine.record.after_commit",
    # the relay's roster adopted after a pull (GET /v1/members).
    "engine.roster.before_commit",
    "engine.roster.after_commit",
    # ``resync``: the resync-required marker cleared after the driver's commit.
    "engine.resync.before_commit",
    "engine.resync.after_commit",
    # ``resume``: the operator clears a durable integrity halt; inside the same
    # transaction, acknowledgements a pulled page contradicted are published
    # again first (``repaired``: written, halt not yet cleared, nothing committed).
    "engine.resume.repaired",
    "engine.resume.before_commit",
    "engine.resume.after_commit",
    # ``security set``: one security-history append.
    "engine.security.before_commit",
    "engine.security.after_commit",
    # ``security identity``: the identity path of the age-v1 epoch.
    "engine.identity.before_commit",
    "engine.identity.after_commit",
    # ``keys epoch add``: one key-epoch append at the relay's boundary.
    "engine.epoch.before_commit",
    "engine.epoch.after_commit",
    # ``keys epoch import``: the epochs a confirmed snapshot adds.
    "engine.epoch_import.before_commit",
    "engine.epoch_import.after_commit",
)

#: The storage contract's and the team registry's transactions (specs/store.md
#: §3; proven by crash_tests/test_store_crash_points.py): each one is one
#: ``write_transaction`` with these two points around its commit.
STORE_CRASH_POINTS: tuple[str, ...] = tuple(
    f"{name}.{when}_commit"
    for name in (
        "team.create",
        "team.add_members",
        "team.rename",
        "team.rename_member",
        "store.send",
        "store.mark_read",
        "store.consume",
        "store.import",
        "store.compact",
    )
    for when in ("before", "after")
)

#: ``restore``'s file swap (syncengine/store/backup.py; proven by
#: tests/e2e/test_backup_restore.py): the checked copy staged, the old store
#: linked to its kept name, the copy renamed over the path.
RESTORE_CRASH_POINTS: tuple[str, ...] = ("restore.staged", "restore.old_kept", "restore.swapped")

#: Reserved names (syncengine/store/reserved_names.py; proven by
#: crash_tests/test_reserved_name_crash_points.py): inside a rename, between
#: the member row's update and its old name's reservation; inside migration
#: 16, after the recovered reservations are written and before its commit.
NAME_CRASH_POINTS: tuple[str, ...] = ("team.rename_member.reserved", "store.migrate.reserved_names")

#: The epoch checkpoint issued on its own (syncengine/engine/epoch_checkpoint.py;
#: proven by crash_tests/test_epoch_checkpoint_crash_points.py): ``keys epoch
#: export`` after a security change retains the successor snapshot. Connect,
#: rotation and import retain theirs inside their own transactions.
CHECKPOINT_CRASH_POINTS: tuple[str, ...] = (
    "engine.checkpoint.before_commit",
    "engine.checkpoint.after_commit",
)

#: ``seed``: a teammate's backup fills in this binding's held rows in one
#: transaction (syncengine/ops/seed.py; proven by crash_tests/test_seed_crash_points.py).
SEED_CRASH_POINTS: tuple[str, ...] = ("seed.commit.before_commit", "seed.commit.after_commit")

#: Migration 14 (syncengine/store/migrations.py; proven by
#: crash_tests/test_quarantine_migration_crash_point.py): ``sync_quarantine``
#: rebuilt with the wider CHECK, the old table dropped, before the commit.
OUTCOME_CRASH_POINTS: tuple[str, ...] = ("store.migrate.quarantine_outcomes",)

#: Every crash point: the Stage-1 ones, stage 2's, the engine's, the store's, restore's.
CRASH_POINTS: tuple[str, ...] = (
    STAGE1_CRASH_POINTS
    + STAGE2_CRASH_POINTS
    + ENGINE_CRASH_POINTS
    + STORE_CRASH_POINTS
    + RESTORE_CRASH_POINTS
    + NAME_CRASH_POINTS
    + CHECKPOINT_CRASH_POINTS
    + SEED_CRASH_POINTS
    + OUTCOME_CRASH_POINTS
)

_ARMED: str | None = os.environ.get("SYNCENGINE_CRASH_AT") or None


def armed_point() -> str | None:
    """The crash point this process was started with, if any."""
    return _ARMED


def crash_point(name: str) -> None:
    """Die here, without cleanup, if this is the armed crash point."""
    if _ARMED is not None and name == _ARMED:
        os._exit(CRASH_EXIT_CODE)
