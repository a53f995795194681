"""The Stage-1 sync verbs of ``syncengine driver`` (specs/sync-stage1.md §7).

Verbs and argv follow the agmsg sync adapter (UPSTREAM-RECORDS §1.1)::

    capabilities [<binding>]
    prepare   <binding> [<limit>]            stdin: one sync_prepare
    reconcile <binding>                      stdin: sync_push_ack*
    apply     <binding>                      stdin: sync_pull_message* sync_pull_cursor
    reprocess <binding> [<limit> [<page-after>]]
    resync-status <binding> [<accepted-floor>]
    resync    <binding>                      stdin: one sync_resync
    read-prepare <binding>                   stdin: one sync_read_context
    read-apply   <binding>                   stdin: one sync_read_snapshot, then items
    read-block   <binding>                   stdin: one sync_read_block
    read-unblock <binding>                   stdin: one sync_read_unblock

(``<limit>`` defaults to 100; without ``<accepted-floor>`` the status
carries ``audit: null``.)

where ``<binding>`` is ``<local-team> <server-instance-id> <remote-team-id>
<protocol-version>``. Only these non-secret identifiers and limits travel on
argv; records travel as strict JSONL on stdin/stdout. Output is data only;
failure is an adapter exit code (:func:`syncengine.ops.errors.adapter_exit_code`)
with ``<status>: <message>`` on stderr, and a failed operation prints no
records at all (so a half-written stream can never be mistaken for output).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from syncengine.cli.missing_deps import missing_deps
from syncengine.local_store import CAPABILITIES
from syncengine.ops.bindings import BindingKey
from syncengine.ops.errors import SyncUsageError, adapter_exit_code
from syncengine.ops.prepare_push import MAX_PREPARE_LIMIT
from syncengine.ops.read_records import (
    SyncReadBlock,
    SyncReadContext,
    SyncReadSnapshot,
    SyncReadUnblock,
    parse_read_item,
)
from syncengine.ops.reprocess import MAX_REPROCESS_LIMIT
from syncengine.ops.resync import SyncResync
from syncengine.ops.sync_records import (
    SyncDriverCapabilities,
    SyncPrepare,
    SyncPullCursor,
    SyncPullMessage,
    SyncPushAck,
    dump_line,
    parse_jsonl,
)
from syncengine.store import Status, StoreError
from syncengine.store.errors import InvalidInput
from wire.errors import WireError
from wire.scalars import parse_seq

if TYPE_CHECKING:
    from syncengine.local_store import Store

__all__ = ["DEFAULT_LIMIT", "run_sync_op"]

#: ``<limit>`` when a caller leaves it out: the upstream engine's steady page.
DEFAULT_LIMIT = 100


def _usage(text: str) -> Exception:
    return SyncUsageError(f"usage: {text}")


def _binding(args: list[str]) -> BindingKey:
    try:
        return BindingKey.from_argv(args[:4])
    except InvalidInput as exc:
        raise SyncUsageError(f"binding argument {exc}") from None


def _limit(text: str, maximum: int) -> int:
    if not text.isascii() or not text.isdigit() or text != str(int(text)):
        raise _usage(f"<limit> must be a decimal integer in 1..{maximum}")
    value = int(text)
    if not 1 <= value <= maximum:
        raise _usage(f"<limit> must be in 1..{maximum}")
    return value


def _dump(records: list[dict[str, Any]]) -> list[str]:
    return [dump_line(record) for record in records]


def _op_capabilities(store: Store | None, args: list[str], data: bytes) -> list[str]:
    if args:
        if len(args) != 4:
            raise _usage(
                "capabilities [<local-team> <server-instance-id> <remote-team-id> "
                "<protocol-version>]"
            )
        _binding(args)
    return _dump([SyncDriverCapabilities(CAPABILITIES).to_obj()])


def _op_prepare(store: Store | None, args: list[str], data: bytes) -> list[str]:
    if len(args) not in (4, 5):
        raise _usage("prepare <binding…> [<limit>]   (one sync_prepare on stdin)")
    key = _binding(args)
    limit = _limit(args[4], MAX_PREPARE_LIMIT) if len(args) == 5 else DEFAULT_LIMIT
    where, value = _one_record(data, "prepare", "sync_prepare")
    request = SyncPrepare.from_obj(value, where)
    assert store is not None
    return _dump(store.sync_prepare_push(key, request, limit).records())


def _op_reconcile(store: Store | None, args: list[str], data: bytes) -> list[str]:
    if len(args) != 4:
        raise _usage("reconcile <binding…>   (sync_push_ack records on stdin)")
    key = _binding(args)
    acks = [SyncPushAck.from_obj(value, where) for where, value in parse_jsonl(data)]
    assert store is not None
    return _dump([store.sync_reconcile_push(key, acks).to_obj()])


def _op_apply(store: Store | None, args: list[str], data: bytes) -> list[str]:
    if len(args) != 4:
        raise _usage("apply <binding…>   (sync_pull_message records, then one sync_pull_cursor)")
    key = _binding(args)
    messages: list[SyncPullMessage] = []
    cursor: SyncPullCursor | None = None
    for where, value in parse_jsonl(data):
        if cursor is not None:
            raise InvalidInput(where, "nothing may follow the sync_pull_cursor record")
        if value.get("type") == "sync_pull_cursor":
            cursor = SyncPullCursor.from_obj(value, where)
        else:
            messages.append(SyncPullMessage.from_obj(value, where))
    if cursor is None:
        raise InvalidInput("stdin", "apply needs exactly one final sync_pull_cursor record")
    assert store is not None
    return _dump(store.sync_apply_pull(key, messages, cursor).records())


def _op_reprocess(store: Store | None, args: list[str], data: bytes) -> list[str]:
    if len(args) not in (4, 5, 6):
        raise _usage("reprocess <binding…> [<limit> [<page-after>]]")
    key = _binding(args)
    limit = _limit(args[4], MAX_REPROCESS_LIMIT) if len(args) >= 5 else DEFAULT_LIMIT
    page_after = args[5] if len(args) == 6 else None
    assert store is not None
    return _dump(store.sync_reprocess(key, limit, page_after).records())


def _op_resync_status(store: Store | None, args: list[str], data: bytes) -> list[str]:
    if len(args) not in (4, 5):
        raise _usage("resync-status <binding…> [<accepted-floor>]")
    key = _binding(args)
    floor = None
    if len(args) == 5:
        try:
            floor = parse_seq(args[4], "accepted-floor")
        except WireError as exc:
            raise _usage(f"<accepted-floor> {exc.rule}") from None
    assert store is not None
    return _dump([store.sync_resync_status(key, floor).to_obj()])


def _op_resync(store: Store | None, args: list[str], data: bytes) -> list[str]:
    key = _read_binding(args, "resync", "one sync_resync")
    where, value = _one_record(data, "resync", "sync_resync")
    request = SyncResync.from_obj(value, where)
    assert store is not None
    return _dump([store.sync_resync(key, request).to_obj()])


def _one_record(data: bytes, op: str, kind: str) -> tuple[str, dict[str, Any]]:
    records = list(parse_jsonl(data))
    if len(records) != 1:
        raise InvalidInput("stdin", f"{op} reads exactly one {kind} record")
    return records[0]


def _read_binding(args: list[str], op: str, stdin: str) -> BindingKey:
    if len(args) != 4:
        raise _usage(f"{op} <binding…>   ({stdin} on stdin)")
    return _binding(args)


def _op_read_prepare(store: Store | None, args: list[str], data: bytes) -> list[str]:
    key = _read_binding(args, "read-prepare", "one sync_read_context")
    where, value = _one_record(data, "read-prepare", "sync_read_context")
    context = SyncReadContext.from_obj(value, where)
    assert store is not None
    return _dump(store.sync_prepare_read_state(key, context).records())


def _op_read_apply(store: Store | None, args: list[str], data: bytes) -> list[str]:
    key = _read_binding(args, "read-apply", "one sync_read_snapshot, then the page's items")
    records = list(parse_jsonl(data))
    if not records:
        raise InvalidInput("stdin", "read-apply needs a sync_read_snapshot record first")
    where, value = records[0]
    snapshot = SyncReadSnapshot.from_obj(value, where)
    items = [parse_read_item(value, where) for where, value in records[1:]]
    assert store is not None
    return _dump([store.sync_apply_read_state(key, snapshot, items).to_obj()])


def _op_read_block(store: Store | None, args: list[str], data: bytes) -> list[str]:
    key = _read_binding(args, "read-block", "one sync_read_block")
    where, value = _one_record(data, "read-block", "sync_read_block")
    request = SyncReadBlock.from_obj(value, where)
    assert store is not None
    return _dump([store.sync_block_read_state(key, request).to_obj()])


def _op_read_unblock(store: Store | None, args: list[str], data: bytes) -> list[str]:
    key = _read_binding(args, "read-unblock", "one sync_read_unblock")
    where, value = _one_record(data, "read-unblock", "sync_read_unblock")
    request = SyncReadUnblock.from_obj(value, where)
    assert store is not None
    return _dump([store.sync_unblock_read_state(key, request).to_obj()])


_SYNC: dict[str, Callable[[Any, list[str], bytes], list[str]]] = {
    "capabilities": _op_capabilities,
    "prepare": _op_prepare,
    "reconcile": _op_reconcile,
    "apply": _op_apply,
    "reprocess": _op_reprocess,
    "resync-status": _op_resync_status,
    "resync": _op_resync,
    "read-prepare": _op_read_prepare,
    "read-apply": _op_read_apply,
    "read-block": _op_read_block,
    "read-unblock": _op_read_unblock,
}
_READS_STDIN = frozenset(
    {
        "prepare",
        "reconcile",
        "apply",
        "resync",
        "read-prepare",
        "read-apply",
        "read-block",
        "read-unblock",
    }
)


def run_sync_op(
    op: str,
    args: list[str],
    *,
    store_path: str | None,
    stdin: IO[bytes],
    stdout: IO[bytes],
    stderr: IO[bytes],
) -> int:
    """Run one sync verb; returns the adapter exit code."""
    if op != "capabilities":
        try:
            import apsw  # noqa: F401
        except ImportError:
            # A sync verb is never a control op: no status line (§1.4).
            return missing_deps(
                op,
                stdout,
                stderr,
                "the APSW SQLite binding (python package apsw) is missing",
                status_line=False,
            )
    # late-bound: a test stands in its own syncengine.local_store.Store
    from syncengine.local_store import Store

    store = Store(store_path) if op != "capabilities" else None
    try:
        data = stdin.read() if op in _READS_STDIN else b""
        lines = _SYNC[op](store, args, data)
    except StoreError as exc:
        code, label, message = adapter_exit_code(exc), exc.status.label, str(exc)
    except Exception as exc:  # last-resort boundary: never a traceback with data
        code, label = 13, Status.RUNTIME_ERROR.label
        message = f"internal error ({type(exc).__name__})"
    else:
        if lines:
            stdout.write(("\n".join(lines) + "\n").encode("utf-8"))
        stdout.flush()
        return 0
    finally:
        if store is not None:
            store.close()
    stderr.write(
        f"syncengine driver {op}: {label}: {message}\n".encode("utf-8", "backslashreplace")
    )
    stderr.flush()
    return code
