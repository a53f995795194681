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

__all__ = ["CRASH_EXIT_CODE", "CRASH_POINTS", "armed_point", "crash_point"]

#: Exit status of an injected crash (distinct from every driver status code).
CRASH_EXIT_CODE = 77

#: Every crash point, in the order an operation passes them.
CRASH_POINTS: tuple[str, ...] = (
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
    # explicit binding management.
    "binding.bind.before_commit",
    "binding.bind.after_commit",
    "binding.retire.before_commit",
    "binding.retire.after_commit",
)

_ARMED: str | None = os.environ.get("SYNCENGINE_CRASH_AT") or None


def armed_point() -> str | None:
    """The crash point this process was started with, if any."""
    return _ARMED


def crash_point(name: str) -> None:
    """Die here, without cleanup, if this is the armed crash point."""
    if _ARMED is not None and name == _ARMED:
        os._exit(CRASH_EXIT_CODE)
