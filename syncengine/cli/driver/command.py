"""``syncengine driver <op> [args…]``: the storage-driver contract as a
command (driver-interface §1.4, §2.1; specs/store.md §8).

Framing follows the contract exactly:

* control ops (``check``, ``init``, ``mark_read_batch``,
  ``read_cursor_consume``, ``compact``) end stdout with the status name and
  exit with its code;
* ``export`` and ``import`` print nothing on stdout, as the bundled drivers
  do (the contract puts them in neither class, and a host may capture their
  stdout beside the file): the outcome is the exit code, a failure's
  message goes to stderr;
* record ops (``send``, ``send_batch``, ``list_unread``, ``read_cursor_get``,
  ``history``, ``watch_tip``, ``watch_after``) print data only and report
  failure by exit code with the message on stderr;
* ``describe`` prints ``key=value`` metadata only and always exits 0;
* ``store_exists`` answers by exit code alone;
* the Stage-1 sync verbs (``capabilities``, ``prepare``, ``reconcile``,
  ``apply``, ``reprocess``, ``resync-status``, ``resync``; the read-state
  verbs ``read-prepare``, ``read-apply``, ``read-block``, ``read-unblock``;
  specs/sync-stage1.md §7, specs/read-state.md §6) take the binding on
  argv — ``<local-team> <server-instance-id> <remote-team-id>
  <protocol-version>`` — read and write JSONL, print data only and exit
  with the upstream adapter codes (2 usage, 11 busy, 12 corrupt_state,
  13 check failed, 14 unsupported).

Message bodies never travel on argv: ``send`` reads the body from stdin and
``send_batch`` reads JSONL records. The store module is imported only when
an op runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

import syncengine
from syncengine.cli.missing_deps import DIRECTIVE_PREFIX as DIRECTIVE_PREFIX
from syncengine.cli.missing_deps import missing_deps
from syncengine.local_store import Store
from syncengine.store import InvalidInput, OutgoingMessage, Status, StoreError
from syncengine.store.log_records import dump_record
from syncengine.store.paths import resolve_store_path

if TYPE_CHECKING:
    import argparse


__all__ = [
    "CONTROL_OPS",
    "OPS",
    "QUIET_OPS",
    "RECORD_OPS",
    "SYNC_OPS",
    "driver_file",
    "register",
    "run_op",
    "run_plain_argv",
]

CONTROL_OPS = frozenset({"check", "init", "mark_read_batch", "read_cursor_consume", "compact"})
#: Silent on stdout whatever happens: outcome by exit code, message on stderr.
QUIET_OPS = frozenset({"export", "import", "store_exists"})
RECORD_OPS = frozenset(
    {"send", "send_batch", "list_unread", "read_cursor_get", "history", "watch_tip", "watch_after"}
)
SYNC_OPS = frozenset(
    {
        "capabilities",
        "prepare",
        "reconcile",
        "apply",
        "reprocess",
        "resync-status",
        "resync",
        "read-prepare",
        "read-apply",
        "read-block",
        "read-unblock",
    }
)
OPS = sorted(CONTROL_OPS | QUIET_OPS | RECORD_OPS | SYNC_OPS | {"describe", "path", "install"})

#: The bash driver file, shipped inside the package (``syncengine driver path``).
DRIVER_FILE = ("drivers", "storage", "syncengine.sh")


class UsageError(Exception):
    """Wrong arguments for an op (reported as runtime_error)."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "driver",
        help="run one storage-driver contract operation",
        description="Run one agmsg storage-driver operation against the local store.",
    )
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="store file (default: SYNCENGINE_STORE or $XDG_STATE_HOME/syncengine/store.db)",
    )
    parser.add_argument("op", choices=OPS, metavar="OP", help="one of: " + ", ".join(OPS))
    # start-up pin: a driver op loads no argparse
    import argparse

    parser.add_argument("args", nargs=argparse.REMAINDER, help="operation arguments")
    parser.set_defaults(handler=_handle)


def run_plain_argv(argv: list[str]) -> int | None:
    """``driver [--store PATH] OP ARGS…`` without argparse (the same grammar
    as :func:`register`'s parser: options before OP, everything after it
    belongs to the op). ``None`` hands anything else — help, a missing or
    unknown op — to the full parser and its messages."""
    store: str | None = None
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--store" and i + 1 < len(argv):
            store, i = argv[i + 1], i + 2
        elif argv[i].startswith("--store="):
            store, i = argv[i].removeprefix("--store="), i + 1
        else:
            return None
    if i >= len(argv) or argv[i] not in OPS:
        return None
    if any(arg in ("-h", "--help") for arg in argv[i + 1 :]):
        return None  # the full parser answers (``syncengine.cli.main``)
    code = run_op(argv[i], argv[i + 1 :], store_path=store)
    _offer_server(argv[i], store)
    return code


def _handle(args: argparse.Namespace) -> int:
    code = run_op(args.op, list(args.args), store_path=args.store)
    _offer_server(args.op, args.store)
    return code


def _offer_server(op: str, store_path: str | None) -> None:
    """Start the driver server when the bash file asked for one
    (``SYNCENGINE_DRIVER_RENDEZVOUS``: no server answered this call), so the
    host's next calls skip the interpreter start (specs/store.md §10)."""
    # The name is rendezvous.RENDEZVOUS_ENV, spelled out so that a
    # call without it (the usual one) imports nothing more.
    rendezvous = os.environ.get("SYNCENGINE_DRIVER_RENDEZVOUS")
    if not rendezvous:
        return
    # start-up pin: a driver op loads no syncengine.cli.driver.rendezvous
    from syncengine.cli.driver.rendezvous import SERVED_OPS, spawn

    if op in SERVED_OPS:
        spawn(resolve_store_path(store_path), rendezvous)


def _write(stream: IO[bytes], lines: list[str]) -> None:
    if lines:
        stream.write(("\n".join(lines) + "\n").encode("utf-8"))
    stream.flush()


def _split_limit(args: list[str]) -> tuple[list[str], int | None]:
    """Pull ``--limit N`` / ``--limit=N`` out of an argument list."""
    rest: list[str] = []
    limit: int | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--limit" or arg.startswith("--limit="):
            if arg == "--limit":
                if i + 1 >= len(args):
                    raise UsageError("--limit needs a value")
                value = args[i + 1]
                i += 2
            else:
                value = arg.split("=", 1)[1]
                i += 1
            if not value.isascii() or not value.isdigit() or value.startswith("0"):
                raise UsageError("--limit must be a positive integer")
            limit = int(value)
            continue
        if arg.startswith("--"):
            raise UsageError(f"unknown option {arg}")
        rest.append(arg)
        i += 1
    return rest, limit


def _arity(args: list[str], low: int, high: int | None, shape: str) -> None:
    if len(args) < low or (high is not None and len(args) > high):
        raise UsageError(f"usage: {shape}")


def _read_stdin(stdin: IO[bytes]) -> bytes:
    return stdin.read()


# -- operations: each returns the stdout lines (records or nothing) ---------------------


def _op_init(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 0, 1, "init [<team>]")
    store.init()
    return []


def _op_check(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 0, 1, "check [<team>]")
    if store.exists():
        store.check()
    return []


def _op_send(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 3, 3, "send <team> <from> <to>   (body on stdin)")

    raw = _read_stdin(stdin)
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("body", "body on stdin is not valid UTF-8") from None
    return [store.send(args[0], args[1], args[2], body).id]


def _op_send_batch(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 0, 0, "send_batch   (JSONL {team, from, to, body} on stdin)")
    # start-up pin: a driver op loads no syncengine.store.event_log
    from syncengine.store.event_log import parse_jsonl

    outgoing = []
    for number, record in parse_jsonl(_read_stdin(stdin), "stdin"):
        if set(record) != {"team", "from", "to", "body"}:
            raise InvalidInput(
                f"stdin line {number}", "record must have exactly team, from, to, body"
            )
        for key in ("team", "from", "to", "body"):
            if not isinstance(record[key], str):
                raise InvalidInput(f"stdin line {number}.{key}", "must be a string")
        outgoing.append(
            OutgoingMessage(record["team"], record["from"], record["to"], record["body"])
        )
    return [sent.id for sent in store.send_many(outgoing)]


def _op_list_unread(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    rest, limit = _split_limit(args)
    _arity(rest, 2, 2, "list_unread <team> <agent> [--limit N]")
    return _records(store.list_unread(rest[0], rest[1], limit))


def _op_mark_read_batch(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 2, None, "mark_read_batch <team> <agent> [<id> ...]")
    store.mark_read_batch(args[0], args[1], args[2:])
    return []


def _op_read_cursor_get(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 2, 2, "read_cursor_get <team> <agent>")
    return [store.read_cursor_get(args[0], args[1])]


def _op_read_cursor_consume(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 3, None, "read_cursor_consume <team> <agent> <cursor> [<id> ...]")
    store.read_cursor_consume(args[0], args[1], args[2], args[3:])
    return []


def _op_watch_tip(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 1, None, "watch_tip <team:agent> [<team:agent> ...]")
    return [store.watch_tip(args)]


def _op_watch_after(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 2, None, "watch_after <cursor> <team:agent> [<team:agent> ...]")

    result = store.watch_after(args[0], args[1:])
    lines = _records(list(result.messages))
    lines.append(dump_record({"type": "cursor", "cursor": result.cursor}))
    return lines


def _op_history(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    rest, limit = _split_limit(args)
    _arity(rest, 1, 2, "history <team> [agent] [--limit N]")
    agent = rest[1] if len(rest) == 2 and rest[1] != "" else None
    return _records(store.history(rest[0], agent, limit))


def _op_export(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    # Hosts call ``storage_export <team> <file>``; the spec's form is
    # ``<file>``. One store holds every team, so the selector names no subset.
    _arity(args, 1, 2, "export [<team>] <file>")
    store.export(_file_argument(args[-1]))
    return []


def _op_import(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 1, 2, "import [<team>] <file>   ('-' reads stdin)")
    if args[-1] == "-":
        store.import_bytes(_read_stdin(stdin), "stdin")
    else:
        store.import_file(_file_argument(args[-1]))
    return []


def _file_argument(name: str) -> str:
    """A file operand that looks like an option is a mistake (``export
    --help`` once wrote a file named ``--help``); ``./-name`` says it is one."""
    if name.startswith("-"):
        raise UsageError(f"{name!r} looks like an option, not a file (write ./{name} for a file)")
    return name


def _op_compact(store: Store, args: list[str], stdin: IO[bytes]) -> list[str]:
    _arity(args, 0, 1, "compact [<team>]")
    store.compact()
    return []


def _records(messages: list[Any]) -> list[str]:
    return [dump_record(message.to_record()) for message in messages]


_OPERATIONS: dict[str, Callable[[Store, list[str], IO[bytes]], list[str]]] = {
    "init": _op_init,
    "check": _op_check,
    "send": _op_send,
    "send_batch": _op_send_batch,
    "list_unread": _op_list_unread,
    "mark_read_batch": _op_mark_read_batch,
    "read_cursor_get": _op_read_cursor_get,
    "read_cursor_consume": _op_read_cursor_consume,
    "watch_tip": _op_watch_tip,
    "watch_after": _op_watch_after,
    "history": _op_history,
    "export": _op_export,
    "import": _op_import,
    "compact": _op_compact,
}


def _describe(store_path: str | None, out: IO[bytes]) -> int:
    # ``describe [<team>]``: hosts may name a team; one store serves them all.
    try:
        from syncengine.local_store import Store

        meta = Store(store_path).describe()
    except Exception:  # describe always succeeds (§2.1): degrade to static facts
        from syncengine.local_store import CAPABILITIES

        meta = {"name": "syncengine", "capabilities": ",".join(CAPABILITIES)}
    _write(out, [f"{key}={value}" for key, value in meta.items()])
    return 0


def driver_file() -> str:
    """Where the installed bash driver file is, for a host to source."""

    return os.path.join(os.path.dirname(os.path.abspath(syncengine.__file__)), *DRIVER_FILE)


def _path(args: list[str], out: IO[bytes], err: IO[bytes]) -> int:
    if args:
        err.write(b"syncengine driver path: takes no arguments\n")
        return 2
    _write(out, [driver_file()])
    return 0


def _missing_deps(op: str, out: IO[bytes], err: IO[bytes], reason: str) -> int:
    return missing_deps(op, out, err, reason, status_line=op in CONTROL_OPS)


def run_op(
    op: str,
    args: list[str],
    *,
    store_path: str | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
) -> int:
    """Run one op with contract framing; returns the exit code."""
    out = stdout if stdout is not None else sys.stdout.buffer
    err = stderr if stderr is not None else sys.stderr.buffer
    inp = stdin if stdin is not None else sys.stdin.buffer
    if op == "describe":
        return _describe(store_path, out)
    if op == "path":
        return _path(args, out, err)
    if op == "install":
        # start-up pin: a driver op loads no syncengine.cli.driver.install
        from syncengine.cli.driver.install import install

        return install(driver_file(), args, out, err)
    if op in SYNC_OPS:
        # start-up pin: a driver op loads no syncengine.cli.driver.sync_verbs
        from syncengine.cli.driver import sync_verbs

        return sync_verbs.run_sync_op(
            op, args, store_path=store_path, stdin=inp, stdout=out, stderr=err
        )
    try:
        import apsw  # noqa: F401
    except ImportError:
        return _missing_deps(
            op, out, err, "the APSW SQLite binding (python package apsw) is missing"
        )

    store = Store(store_path)
    status = Status.OK
    lines: list[str] = []
    message = ""
    try:
        if op == "store_exists":
            _arity(args, 0, 1, "store_exists [<team>]")
            return 0 if store.exists() else 1
        lines = _OPERATIONS[op](store, args, inp)
    except UsageError as exc:
        status, message = Status.RUNTIME_ERROR, str(exc)
    except StoreError as exc:
        status, message = exc.status, str(exc)
    except Exception as exc:  # last-resort boundary: never a traceback with data
        status, message = Status.RUNTIME_ERROR, f"internal error ({type(exc).__name__})"
    finally:
        store.close()
    if status is not Status.OK:
        err.write(f"syncengine driver {op}: {message}\n".encode("utf-8", "backslashreplace"))
        err.flush()
        lines = [status.label] if op in CONTROL_OPS else []
        _write(out, lines)
        return status.exit_code
    if op in CONTROL_OPS:
        lines.append(Status.OK.label)
    _write(out, lines)
    return 0
