"""``syncengine backup`` / ``syncengine restore`` (issue #15, item 5;
syncengine/store/backup.py holds the mechanism and its guarantees)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncengine.engine import Engine
from syncengine.engine.errors import classify
from syncengine.engine.lock import EngineLock, lock_path_for
from syncengine.local_store import Store
from syncengine.ops.seed import held_wire_ids, read_backup, seed_history
from syncengine.store.backup import restore_store
from syncengine.store.errors import InvalidInput
from wire.scalars import format_timestamp

__all__ = ["register"]

_EPILOG = (
    "exit codes: 0 ok   2 usage   3 the store is busy (try again)   8 an engine holds a "
    "binding of this store (restore)   10 missing dependency   12 corrupt store or backup   "
    "13 runtime error (bad path)"
)


def register(subparsers: Any) -> None:
    backup = subparsers.add_parser(
        "backup",
        help="write a consistent online snapshot of the store to a new file",
        description="Copies the live store with SQLite's backup API while it stays in use. "
        "The copy remembers it is a backup: once restored, its first sync pulls to the "
        "relay's head and adopts this machine's own messages published after the backup "
        "instead of sending them again.",
        epilog=_EPILOG,
    )
    backup.add_argument("--output", required=True, metavar="FILE", help="a new file (0600)")
    backup.add_argument("--store", metavar="PATH", help="store file (default: SYNCENGINE_STORE)")
    backup.add_argument("--json", action="store_true", help="machine-readable output")
    backup.set_defaults(handler=_backup)

    restore = subparsers.add_parser(
        "restore",
        help="put a backup in place of the store (the current one is kept aside)",
        description="Stop every process using the store first. The current store is kept "
        "as <store>.before-restore-<time>; the backup is checked, copied in and renamed "
        "over the store. The next sync pulls first and sends only what the relay lacks.",
        epilog=_EPILOG,
    )
    restore.add_argument("--input", required=True, metavar="FILE", help="a backup file")
    restore.add_argument("--store", metavar="PATH", help="store file (default: SYNCENGINE_STORE)")
    restore.add_argument("--json", action="store_true", help="machine-readable output")
    restore.set_defaults(handler=_restore)

    seed = subparsers.add_parser(
        "seed",
        help="give this machine the team's older history from a teammate's backup",
        description="For a machine that joined an encrypted team after its older messages "
        "were sealed: connect and sync it first (those messages are then held as "
        "'before_join'), then seed it from a backup another machine of the team made with "
        "'syncengine backup'. Each held message the backup holds under the same wire ID, "
        "sequence and envelope is imported, with the read state it had there; nothing is "
        "sent, and this machine keeps its own store, identity, credential and read state. "
        "Safe to run again: only what is still held is seeded.",
        epilog="exit codes: 0 ok   2 usage   3 the store is busy (try again)   7 the team is "
        "not connected here   8 an engine holds this team's binding (stop 'syncengine run' "
        "first)   10 missing dependency   12 corrupt store or backup   13 a backup of another "
        "stream or one that contradicts what this machine pulled, or a bad path",
    )
    seed.add_argument("--input", required=True, metavar="FILE", help="a teammate's backup file")
    seed.add_argument("--store", metavar="PATH", help="store file (default: SYNCENGINE_STORE)")
    seed.add_argument(
        "--team", metavar="TEAM", help="local team (optional when the store has one connected team)"
    )
    seed.add_argument("--json", action="store_true", help="machine-readable output")
    seed.set_defaults(handler=_seed)


def _fail(command: str, exc: BaseException) -> int:
    if isinstance(exc, BrokenPipeError):
        raise exc  # the reader went away: the entry point exits 141 quietly
    failure = classify(exc)
    sys.stderr.write(f"syncengine {command}: {failure.message}\n  remedy: {failure.remediation}\n")
    return failure.exit_code


def _backup(args: argparse.Namespace) -> int:
    try:
        with Store(args.store) as store:
            written = store.backup(args.output)
    except Exception as exc:
        return _fail("backup", exc)
    obj = {"ok": True, "backup": str(written)}
    print(json.dumps(obj) if args.json else f"backed up to {written}")
    return 0


def _restore(args: argparse.Namespace) -> int:

    def check(path: Path) -> None:
        with Store(path) as candidate:
            candidate.check()

    try:
        with Store(args.store) as current:
            target = current.path.absolute()
            bindings: list[tuple[Any, ...]] = (
                current.conn.execute(
                    "SELECT server_instance_id, remote_team_id FROM sync_bindings"
                ).fetchall()
                if target.exists()
                else []
            )
        with ExitStack() as held:  # no engine may run on any binding meanwhile
            for server, team in bindings:
                held.enter_context(EngineLock(lock_path_for(target, server, team)))
            kept = restore_store(Path(args.input), target, check)
    except Exception as exc:
        return _fail("restore", exc)
    obj = {"ok": True, "store": str(target), "kept": None if kept is None else str(kept)}
    text = f"restored {target} from {args.input}"
    if kept is not None:
        text += f"; the replaced store is kept as {kept}"
    print(json.dumps(obj) if args.json else text)
    return 0


def _seed(args: argparse.Namespace) -> int:

    source = Path(args.input)
    try:
        if not source.is_file():
            raise InvalidInput("--input", f"{source} is not a file")
        with Engine(args.store, args.team) as engine, engine.lock():
            store = engine.store
            if source.absolute() == store.path.absolute():
                raise InvalidInput("--input", "the backup is this store itself")
            # A private copy, opened (and brought to this schema) as a store:
            # the backup file itself is only read.
            scratch = Path(tempfile.mkdtemp(prefix=".seed-", dir=store.path.absolute().parent))
            try:
                copy = scratch / "backup.db"
                shutil.copyfile(source, copy)
                copy.chmod(0o600)
                key = engine.connection.key
                with Store(copy) as backup:
                    backup.check()
                    found = read_backup(backup.conn, key, held_wire_ids(store.conn, key))
                now = format_timestamp(datetime.now(UTC))
                result = seed_history(store.conn, store.path, key, found, now)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except Exception as exc:
        return _fail("seed", exc)
    obj = {"ok": True, "input": str(source), **result.to_obj()}
    text = f"seeded {result.seeded} message(s) from {source} ({result.read} already read)"
    if result.unmatched:
        text += f"; {result.unmatched} held message(s) are not in that backup and stay as they were"
    print(json.dumps(obj) if args.json else text)
    return 0
