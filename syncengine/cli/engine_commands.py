"""Engine commands: ``connect``, ``push``, ``pull``, ``sync``, ``run``,
``status``, ``resync``, ``reprocess`` and ``security`` (specs/engine.md
§8.3).

Every command takes ``--store PATH`` (else ``SYNCENGINE_STORE``, else the
XDG location), ``--team TEAM`` (optional when the store has one connected
team) and ``--json``. Exit codes are the table of
:mod:`syncengine.engine.errors`: 0 ok, 2 usage, 3 transient, 4 refused,
5 resync-required, 6 halted, 7 not connected/configuration, 8 locked, and
the store's 10/12/13. Errors go to stderr with the remedy; with ``--json``
stdout also carries ``{"ok": false, "error": {...}}``.

Heavy modules (the engine, httpx) are imported inside the handlers so the
registry stays cheap to build.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncengine.cli import EARLY_STOPS

__all__ = ["register"]

_SECURITY_MODES = ("plaintext-allowed", "e2ee-required")


def _common(parser: argparse.ArgumentParser, *, team_required: bool = False) -> None:
    parser.add_argument("--store", metavar="PATH", help="store file (default: SYNCENGINE_STORE)")
    parser.add_argument(
        "--team",
        metavar="TEAM",
        required=team_required,
        help="local team"
        if team_required
        else "local team (optional when the store has one connected team)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _deadline_option(parser: argparse.ArgumentParser) -> None:
    """``--deadline``: the whole command's time budget (issue #14, item 2); the
    default is ``limits.DEFAULT_COMMAND_DEADLINE``, applied in :func:`_engine`
    (importing the engine here would slow every command's start)."""
    parser.add_argument(
        "--deadline",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="give up after this long in all (default: 900); what was committed stays committed",
    )


def _took(seconds: float) -> str:
    return f" (in {seconds:.1f} s)"


def _stamp() -> str:
    """A log line's UTC time, to the second."""
    # start-up pin: status --help loads no datetime
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _once_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--once",
        action="store_true",
        help="one bounded push round instead of draining the backlog",
    )


def _seconds(text: str) -> float:
    # start-up pin: status loads no syncengine.engine.deadline
    from syncengine.engine.deadline import check_deadline_seconds

    try:
        return check_deadline_seconds(float(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be an integer within 1..1000, not {text[:40]!r}")
    return value


def _sequence(option: str) -> Callable[[str], int]:
    """An argparse type for a canonical sequence number named ``option``."""

    def parse(text: str) -> int:
        # start-up pin: status --help loads no wire.errors
        from wire.errors import WireError

        # start-up pin: status --help loads no wire.scalars
        from wire.scalars import parse_seq

        try:
            return parse_seq(text, option)
        except WireError as exc:
            raise argparse.ArgumentTypeError(f"{exc.rule} (a sequence number like 100)") from None

    return parse


#: The held quarantine statuses (``syncengine.ops.quarantine.BLOCKING_STATUSES``,
#: named here so that building the parser imports no sync code).
QUARANTINE_STATUSES = (
    "unsupported_cipher",
    "pending_key",
    "authentication_failed",
    "malformed",
    "policy_violation",
    "manifest_mismatch",
    "before_join",
)


def register(subparsers: Any) -> None:
    connect = subparsers.add_parser(
        "connect",
        help="pair this store's team with a relay team",
        description="Exchange a one-time pairing token for a device credential and record "
        "the binding. The token is read from stdin ('--token -') or a file "
        "('--token @PATH'); a literal token on the command line is refused.",
    )
    connect.add_argument(
        "--endpoint", metavar="URL", help="the relay (default with --replace: as recorded)"
    )
    connect.add_argument("--token", required=True, metavar="SRC", help="'-' or '@PATH'")
    connect.add_argument("--security", choices=_SECURITY_MODES, help="required unless --replace")
    connect.add_argument(
        "--replace",
        action="store_true",
        help="pair a connected team again (revoked or lost credential, moved relay): "
        "everything else of the binding is kept",
    )
    connect.add_argument("--key-id", metavar="K", help="age-v1 epoch key_id")
    connect.add_argument("--recipients-file", metavar="F", help="age-v1 epoch manifest")
    connect.add_argument("--identity", metavar="FILE", help="age-v1 identity for the epoch")
    connect.add_argument(
        "--epochs-file",
        metavar="F",
        help="join with the team's key-epoch and security histories from an epoch "
        "snapshot ('syncengine keys epoch export' on a connected machine)",
    )
    connect.add_argument(
        "--confirm-digest", metavar="SHA256", help="the snapshot digest, confirmed live"
    )
    connect.add_argument(
        "--start-new-key-history",
        action="store_true",
        help="DANGER: start a new security and key-epoch history although the relay "
        "already holds the team's messages (only for a team that knowingly starts over; "
        "otherwise join with --epochs-file)",
    )
    connect.add_argument(
        "--credential-file",
        metavar="PATH",
        help="where to keep the bearer credential (default: <store-dir>/credentials/TEAM.json)",
    )
    _common(connect, team_required=True)
    connect.set_defaults(handler=_connect)

    push = subparsers.add_parser(
        "push",
        help="send every pending local message to the relay",
        description="Drains the whole backlog in rounds of --limit (default 1000), each "
        "round durable as it is acknowledged; --once sends one round of at most --limit "
        "(default 100). --deadline bounds the whole command.",
    )
    push.add_argument("--limit", type=_limit, default=None, metavar="N", help="1..1000")
    _once_option(push)
    push.add_argument("--all", action="store_true", help=argparse.SUPPRESS)  # the default now
    _common(push)
    _deadline_option(push)
    push.set_defaults(handler=_push)

    pull = subparsers.add_parser("pull", help="fetch and apply every new relay message")
    pull.add_argument("--limit", type=_limit, default=None, metavar="N", help="page size")
    _common(pull)
    _deadline_option(pull)
    pull.set_defaults(handler=_pull)

    sync = subparsers.add_parser(
        "sync",
        help="push every pending message, then pull everything new",
        description="Drains the push backlog (rounds of --limit, default 1000) and then "
        "every new relay page, within --deadline; --once pushes one round of at most "
        "--limit (default 100) before the pull.",
    )
    sync.add_argument("--limit", type=_limit, default=None, metavar="N", help="push limit")
    _once_option(sync)
    _common(sync)
    _deadline_option(sync)
    sync.set_defaults(handler=_sync)

    run = subparsers.add_parser(
        "run",
        help="sync in a loop until SIGTERM/SIGINT",
        description="Cycle push+pull every --interval seconds (with jitter), without "
        "sleeping while catching up. Transient errors back off; refusals are recorded "
        "and the loop stays up. Only one engine may run per binding.",
    )
    run.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds between cycles (default 5; 60 while the relay's live wait answers, "
        "since a wake or a local send starts a cycle at once)",
    )
    run.add_argument(
        "--no-live",
        action="store_true",
        help="poll at the interval only: no live wait on the relay, no local change watch",
    )
    run.add_argument("--refusal-wait", type=float, default=None, help=argparse.SUPPRESS)
    run.add_argument("--backoff-cap", type=float, default=None, help=argparse.SUPPRESS)
    _common(run)
    run.set_defaults(handler=_run)

    status = subparsers.add_parser("status", help="binding, cursors, pending work, last error")
    _common(status)
    status.set_defaults(handler=_status)

    resync = subparsers.add_parser(
        "resync",
        help="approve a retention gap after HTTP 410 (operator action)",
        description="Accept that the relay no longer holds the messages between this "
        "machine's cursor and the relay's retention floor, and continue from the floor. "
        "This is an explicit, audited approval: the floor you name must equal the one the "
        "relay reports right now ('syncengine status' shows the exact command). Nothing "
        "else changes: unpushed messages are still pushed, quarantine and read state stay. "
        "Running it again with the same floor reports the recorded result.",
        epilog="exit codes: 0 accepted (or already accepted), 2 usage, 3 relay unreachable (try "
        "again), 4 refused: the approval does not match the relay or cursor now (nothing "
        "changed), 6 halted (another relay answered), 7 not connected or driver without "
        "stage1-resync, 8 another engine holds the binding, 12/13 store errors",
    )
    resync.add_argument(
        "--accept-floor",
        required=True,
        type=_sequence("--accept-floor"),
        metavar="SEQ",
        help="the relay's min_available_seq, exactly as 'syncengine status' shows it",
    )
    _common(resync, team_required=True)
    _deadline_option(resync)
    resync.set_defaults(handler=_resync)

    reprocess = subparsers.add_parser(
        "reprocess", help="re-evaluate quarantined messages (after installing a key)"
    )
    reprocess.add_argument("--limit", type=_limit, default=None, metavar="N", help="page size")
    _common(reprocess)
    reprocess.set_defaults(handler=_reprocess)

    resume = subparsers.add_parser(
        "resume",
        help="clear an integrity halt after verifying the relay (operator action)",
        description="A relay that contradicted this machine (a page conflicting with what "
        "it holds, an older state than it reported before, another instance answering) "
        "halts the binding durably: sync, pull, push and run make no request until an "
        "operator has verified the relay and resumes. The next operation checks "
        "everything again and halts again if the relay still contradicts.",
    )
    _common(resume)
    resume.set_defaults(handler=_resume)

    disconnect = subparsers.add_parser(
        "disconnect",
        help="end the team's connection (revoke and delete the credential); keep every message",
        description="Revokes the credential on the relay when it answers, deletes the local "
        "credential file and removes the connection. Messages, read state and the sync "
        "binding stay: connecting to the same relay team again publishes nothing twice.",
    )
    _common(disconnect, team_required=True)
    disconnect.set_defaults(handler=_disconnect)

    doctor = subparsers.add_parser(
        "doctor",
        help="check store, binding, files, relay, clock and sync state",
        description="Each check prints a verdict (ok, warn, fail) and, when not ok, the "
        "remedy. Reads only: nothing is written, the relay sees two GETs.",
        epilog="exit codes: 0 every check passed (warnings allowed)   1 a check failed   "
        "2 usage   10/12/13 the store cannot be opened",
    )
    _common(doctor)
    doctor.set_defaults(handler=_doctor)

    quarantine = subparsers.add_parser(
        "quarantine", help="envelopes this machine pulled but could not import"
    )
    q_actions = quarantine.add_subparsers(dest="action", metavar="ACTION")
    q_actions.required = True
    q_list = q_actions.add_parser(
        "list",
        help="each blocked envelope: server_seq, wire ID, status, reason",
        description="Blocked envelopes stay in quarantine until this machine can open "
        "them (an identity installed, a newer program: then 'syncengine reprocess'). "
        "Messages from before this machine joined (before_join) are listed too: they need "
        "nothing ('syncengine seed' fills them in from a teammate's backup). "
        "Oldest first; page with --after the last server_seq shown.",
    )
    q_list.add_argument("--status", choices=QUARANTINE_STATUSES, help="only this status")
    q_list.add_argument("--after", type=_sequence("--after"), default=0, metavar="SEQ")
    q_list.add_argument("--limit", type=_limit, default=100, metavar="N", help="1..1000")
    _common(q_list)
    q_list.set_defaults(handler=_quarantine_list)

    read_state = subparsers.add_parser(
        "read-state", help="read-state sync: clear a member's block after remedying it"
    )
    read_actions = read_state.add_subparsers(dest="action", metavar="ACTION")
    read_actions.required = True
    unblock = read_actions.add_parser(
        "unblock",
        help="let a blocked member's reads sync again (after remedying the cause)",
        description="A member is blocked when the relay refused its out-of-order reads "
        "(read-state-limit-exceeded): read or consume its oldest unread message, or "
        "reprocess the quarantined one holding it back, then unblock. A name mismatch "
        "clears by itself once the local and relay names agree.",
    )
    unblock.add_argument("--member", required=True, metavar="NAME")
    _common(unblock)
    unblock.set_defaults(handler=_read_state_unblock)

    security = subparsers.add_parser("security", help="local security history and identity")
    actions = security.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="the local security history")
    _common(show)
    show.set_defaults(handler=_security_show)
    set_mode = actions.add_parser(
        "set", help="append a minimum security mode at the relay's next sequence boundary"
    )
    set_mode.add_argument("mode", choices=_SECURITY_MODES)
    _common(set_mode)
    set_mode.set_defaults(handler=_security_set)
    identity = actions.add_parser("identity", help="install the age-v1 identity file (by path)")
    identity.add_argument("file")
    identity.add_argument(
        "--key-id",
        metavar="K",
        help="only for this epoch (default: every epoch whose recipients include it)",
    )
    _common(identity)
    identity.set_defaults(handler=_security_identity)


# -- output ------------------------------------------------------------------------------


def _emit(args: argparse.Namespace, obj: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(obj, ensure_ascii=False, sort_keys=False))
    elif text:
        print(text)


def _fail(args: argparse.Namespace, exc: BaseException) -> int:
    # start-up pin: status --help loads no syncengine.engine.errors
    from syncengine.engine.errors import classify

    failure = classify(exc)
    command = args.command if getattr(args, "action", None) is None else args.action
    if getattr(args, "epoch_action", None) is not None:
        command = f"keys epoch {args.epoch_action}"
    sys.stderr.write(f"syncengine {command}: {failure.message}\n  remedy: {failure.remediation}\n")
    if args.json:
        print(
            json.dumps(
                {
                    "ok": False,
                    "error": {
                        "code": failure.code,
                        "state": failure.state.value,
                        "http_status": failure.http_status,
                        "message": failure.message,
                        "remediation": failure.remediation,
                    },
                },
                ensure_ascii=False,
            )
        )
    return failure.exit_code


def _guarded(args: argparse.Namespace, action: Callable[[], int]) -> int:
    try:
        return action()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # the reader went away: the entry point exits 141 quietly
    except Exception as exc:
        return _fail(args, exc)


def _engine(args: argparse.Namespace) -> Any:
    # start-up pin: status --help loads no syncengine.engine
    from syncengine.engine import Engine

    # start-up pin: status --help loads no syncengine.engine.workers
    from syncengine.engine.workers import worker_count

    if not hasattr(args, "deadline"):  # a local command: no relay, no budget
        return Engine(args.store, args.team, progress_stream=sys.stderr, workers=worker_count())
    # start-up pin: status loads no syncengine.engine.deadline
    from syncengine.engine.deadline import CommandDeadline

    # start-up pin: status --help loads no syncengine.engine.limits
    from syncengine.engine.limits import DEFAULT_COMMAND_DEADLINE

    deadline = CommandDeadline(args.deadline or DEFAULT_COMMAND_DEADLINE)
    return Engine(
        args.store,
        args.team,
        progress_stream=sys.stderr,
        workers=worker_count(),
        interrupt=deadline.check,
        sleep=deadline.sleep,
    )


# -- handlers ----------------------------------------------------------------------------


def _connect(args: argparse.Namespace) -> int:
    if args.replace:
        return _reconnect(args)
    needed = ("endpoint",) if args.epochs_file else ("endpoint", "security")
    missing = [f"--{n}" for n in needed if getattr(args, n) is None]
    if missing:
        sys.stderr.write(f"syncengine connect: {' and '.join(missing)} required (or --replace)\n")
        return 2

    def action() -> int:
        # start-up pin (HTTP_STACK): only this path loads h11
        from syncengine.engine import connect_store, read_token

        token = read_token(args.token, sys.stdin.buffer)
        connected = connect_store(
            args.store,
            endpoint=args.endpoint,
            token=token,
            team=args.team,
            mode=args.security,
            key_id=args.key_id,
            recipients_file=args.recipients_file,
            identity_file=args.identity,
            credential_file=args.credential_file,
            epochs_file=args.epochs_file,
            confirm_digest=args.confirm_digest,
            start_new_key_history=args.start_new_key_history,
        )
        k = connected.key
        text = (
            f"connected team {k.local_team} to {connected.endpoint} "
            f"(remote team {connected.remote_team_name} {k.remote_team_id}, "
            f"instance {k.server_instance_id}, security {connected.mode.value})"
        )
        if connected.min_available_seq > 0:
            # start-up pin: status loads no syncengine.engine.resync
            from syncengine.engine.resync import resync_command

            command = resync_command(k.local_team, connected.min_available_seq, args.store)
            text += (
                f"\nnote: the relay has dropped sequences 1..{connected.min_available_seq} "
                "by retention; this machine starts after an explicit approval:\n  " + command
            )
        _emit(args, connected.to_obj(), text)
        return 0

    return _guarded(args, action)


def _reconnect(args: argparse.Namespace) -> int:
    given = [
        f"--{name.replace('_', '-')}"
        for name in (
            "security",
            "key_id",
            "recipients_file",
            "identity",
            "credential_file",
            "epochs_file",
            "confirm_digest",
        )
        if getattr(args, name) is not None
    ]
    if given:
        sys.stderr.write(
            f"syncengine connect --replace: {', '.join(given)} cannot change with --replace "
            "(the binding keeps its security, epoch and credential location)\n"
        )
        return 2

    def action() -> int:
        # start-up pin (HTTP_STACK): only this path loads h11
        from syncengine.engine import read_token

        # start-up pin (HTTP_STACK): only this path loads h11
        from syncengine.engine.reconnect import replace_connection

        token = read_token(args.token, sys.stdin.buffer)
        replaced = replace_connection(
            args.store, team=args.team, token=token, endpoint=args.endpoint
        )
        revoked = "revoked" if replaced.previous_revoked else "not revocable (already revoked?)"
        text = (
            f"team {replaced.local_team} paired again at {replaced.endpoint}: credential "
            f"{replaced.credential_id} replaces {replaced.previous_credential_id} ({revoked}); "
            "cursors, mappings and read state are kept"
        )
        _emit(args, replaced.to_obj(), text)
        return 0

    return _guarded(args, action)


def _locked(args: argparse.Namespace, work: Callable[[Any], int]) -> int:
    def action() -> int:
        with _engine(args) as engine, engine.lock():
            return work(engine)

    return _guarded(args, action)


def _push_obj(report: Any) -> dict[str, Any]:
    return {
        "candidates": report.candidates,
        "batches": report.batches,
        "splits": report.splits,
        "stored": report.stored,
        "duplicate": report.duplicate,
        "sealed_blocked": report.sealed_blocked,
        "cipher": report.cipher,
        "allow_new": report.allow_new,
        "blocked_reason": report.blocked_reason,
        "push_cursor": str(report.push_cursor),
    }


def _pull_obj(report: Any) -> dict[str, Any]:
    return {
        "pages": report.pages,
        "received": report.received,
        "outcomes": report.outcomes,
        "transport_cursor": str(report.transport_cursor),
        "read_state": None if report.read_state is None else report.read_state.to_obj(),
    }


def _push_text(report: Any) -> str:
    text = f"pushed {report.candidates} message(s): {report.stored} stored, "
    text += f"{report.duplicate} already on the relay"
    if not report.allow_new:
        text += f"\nnew messages are not being sent: {report.blocked_reason}"
    return text


def _pull_text(report: Any) -> str:
    detail = ", ".join(f"{n} {state}" for state, n in report.outcomes.items())
    return f"pulled {report.received} message(s)" + (f": {detail}" if detail else "")


def _push(args: argparse.Namespace) -> int:
    # start-up pin: status --help loads no syncengine.engine.limits
    from syncengine.engine.limits import CATCH_UP_PUSH_LIMIT, STEADY_PUSH_LIMIT

    def work(engine: Any) -> int:
        # The backlog drains one bounded push at a time (issue #18: a cron job
        # once needed hundreds of runs for a 20,000-message backlog): each
        # prepares, sends and reconciles at most --limit messages, so memory
        # stays one push wide and every acknowledgement is durable as it comes.
        started = time.monotonic()
        if args.once and not args.all:
            report = engine.push(args.limit or STEADY_PUSH_LIMIT)
        else:
            report = engine.push_all(args.limit or CATCH_UP_PUSH_LIMIT)
        elapsed = time.monotonic() - started
        _emit(
            args,
            {"ok": True, "push": _push_obj(report), "elapsed_s": round(elapsed, 3)},
            _push_text(report) + _took(elapsed),
        )
        return 0

    return _locked(args, work)


def _pull(args: argparse.Namespace) -> int:
    # start-up pin: status --help loads no syncengine.engine.limits
    from syncengine.engine.limits import PULL_PAGE_LIMIT

    def work(engine: Any) -> int:
        started = time.monotonic()
        report = engine.pull(args.limit or PULL_PAGE_LIMIT)
        elapsed = time.monotonic() - started
        _emit(
            args,
            {"ok": True, "pull": _pull_obj(report), "elapsed_s": round(elapsed, 3)},
            _pull_text(report) + _took(elapsed),
        )
        return 0

    return _locked(args, work)


def _sync(args: argparse.Namespace) -> int:
    # start-up pin: status --help loads no syncengine.engine.limits
    from syncengine.engine.limits import CATCH_UP_PUSH_LIMIT, STEADY_PUSH_LIMIT

    def work(engine: Any) -> int:
        started = time.monotonic()
        adopted = _adoption_pull(engine)
        if args.once:
            report = engine.sync(args.limit or STEADY_PUSH_LIMIT)
        else:
            report = engine.sync(args.limit or CATCH_UP_PUSH_LIMIT, drain=True)
        pulled = report.pull if adopted is None else _merged_pulls(adopted, report.pull)
        elapsed = time.monotonic() - started
        _emit(
            args,
            {
                "ok": True,
                "push": _push_obj(report.push),
                "pull": _pull_obj(pulled),
                "elapsed_s": round(elapsed, 3),
            },
            _push_text(report.push) + "\n" + _pull_text(pulled) + _took(elapsed),
        )
        return 0

    return _locked(args, work)


def _adoption_pull(engine: Any) -> Any:
    """The first sync of a restored store pulls to the relay's head before it
    pushes (syncengine/ops/adopt.py). The engine's sync does that pull
    itself and reports only the pull after its push, so a restore's first
    sync once said "pulled 0 message(s)" after adopting 3 (issue #33). When
    this binding is adopting, the command runs that catch-up as the engine's
    own ``pull`` first (the same pages, then adoption ends), and reports its
    numbers together with the sync's; ``None`` when not adopting."""
    # start-up pin: status --help loads no syncengine.engine.limits
    from syncengine.engine.limits import PULL_PAGE_LIMIT

    if not engine.store.sync_adopting(engine.connection.key):
        return None
    return engine.pull(PULL_PAGE_LIMIT)


def _merged_pulls(first: Any, second: Any) -> Any:
    """One pull report for two pulls of one command, in order."""
    # start-up pin: status --help loads no dataclasses
    from dataclasses import replace

    outcomes = dict(first.outcomes)
    for state, n in second.outcomes.items():
        outcomes[state] = outcomes.get(state, 0) + n
    return replace(
        second,
        pages=first.pages + second.pages,
        received=first.received + second.received,
        outcomes=outcomes,
    )


def _reprocess(args: argparse.Namespace) -> int:
    # start-up pin: status --help loads no syncengine.engine.limits
    from syncengine.engine.limits import REPROCESS_PAGE_LIMIT

    def work(engine: Any) -> int:
        report = engine.reprocess(args.limit or REPROCESS_PAGE_LIMIT)
        detail = ", ".join(f"{n} {state}" for state, n in report.outcomes.items())
        _emit(
            args,
            {
                "ok": True,
                "reprocess": {
                    "pages": report.pages,
                    "candidates": report.candidates,
                    "outcomes": report.outcomes,
                },
            },
            f"reprocessed {report.candidates} message(s)" + (f": {detail}" if detail else ""),
        )
        return 0

    return _locked(args, work)


def _resync(args: argparse.Namespace) -> int:
    def work(engine: Any) -> int:
        report = engine.resync(args.accept_floor)
        audit = report.result.audit
        text = (
            f"accepted the retention gap {audit.gap_start}..{audit.gap_end} "
            f"({audit.unavailable} sequence number(s) no longer on the relay); "
            f"transport cursor {audit.expected_transport_cursor} -> {audit.accepted_floor}"
        )
        if report.already_applied:
            text = "already done: " + text
        _emit(
            args,
            {"ok": True, "resync": report.to_obj()},
            text + "\nrun 'syncengine pull' (or let the schedule) continue from the floor",
        )
        return 0

    return _locked(args, work)


def _run(args: argparse.Namespace) -> int:
    # A stop request that arrives while the engine is still being imported
    # must end ``run`` cleanly (exit 0), not kill it by signal (#14): catch it
    # now, before the heavy imports, and hand it to the loop's stop signal.
    import signal

    # start-up pin: status --help loads no threading
    import threading

    early = threading.Event()
    earlier = {
        sig: signal.signal(sig, lambda signum, frame: early.set())
        for sig in (signal.SIGTERM, signal.SIGINT)
    }
    if EARLY_STOPS:  # asked to stop while the command line was still being read
        early.set()
    try:
        return _run_loop(args, early)
    finally:
        for sig, handler in earlier.items():
            signal.signal(sig, handler)


def _run_loop(args: argparse.Namespace, early: Any) -> int:
    def action() -> int:
        # start-up pin: status --help loads no dataclasses
        from dataclasses import replace

        # start-up pin: status loads no syncengine.engine.runloop
        from syncengine.engine import Engine, RunLoop, RunSettings, StopSignal

        # start-up pin: status loads no syncengine.engine.runloop
        from syncengine.engine.runloop import handle_stop_signals

        # start-up pin: status --help loads no syncengine.engine.workers
        from syncengine.engine.workers import worker_count

        settings = RunSettings()
        overrides: dict[str, float] = {}
        if args.interval is not None:
            overrides["interval"] = args.interval
        if args.refusal_wait is not None:
            overrides["refusal_wait"] = args.refusal_wait
        if args.backoff_cap is not None:
            overrides["backoff_cap"] = args.backoff_cap
            overrides["backoff_base"] = min(settings.backoff_base, args.backoff_cap)
        try:
            settings = replace(settings, **overrides)
        except ValueError as exc:
            sys.stderr.write(f"syncengine run: {exc}\n")
            return 2
        stop = StopSignal()
        with handle_stop_signals(stop):
            if early.is_set():  # asked to stop before the loop began
                stop.set()
            engine = Engine(
                args.store,
                args.team,
                progress_stream=sys.stderr,
                sleep=stop.interruptible_sleep,
                workers=worker_count(),
                interrupt=stop.check,
            )
            with engine, engine.lock():
                waker = None if args.no_live else _live_waker(engine, stop, args.json)

                def on_cycle(outcome: Any) -> None:
                    if args.json:
                        obj = {"at": _stamp(), **outcome.to_obj()}
                        print(json.dumps(obj, ensure_ascii=False), flush=True)
                        return
                    if not outcome.ok:
                        print(
                            f"{_stamp()} cycle {outcome.number}: {outcome.state}: "
                            f"{outcome.message} (next try in {outcome.wait:.0f} s)",
                            flush=True,
                        )
                    elif outcome.report.push.candidates or outcome.report.pull.received:
                        print(
                            f"{_stamp()} cycle {outcome.number}: "
                            + _push_text(outcome.report.push).replace("\n", "; ")
                            + "; "
                            + _pull_text(outcome.report.pull),
                            flush=True,
                        )

                team = engine.connection.local_team
                if args.json:
                    started = {"event": "started", "at": _stamp(), "team": team}
                    print(json.dumps(started), flush=True)
                else:
                    print(
                        f"{_stamp()} syncengine run: team {team} at {engine.connection.endpoint}, "
                        f"every {settings.interval:g} s (SIGTERM stops)",
                        flush=True,
                    )
                # start-up pin: status loads no syncengine.engine.live
                from syncengine.engine.live import LIVE_INTERVAL

                live_interval = settings.interval if args.interval is not None else LIVE_INTERVAL
                loop = RunLoop(
                    engine,
                    stop,
                    settings,
                    on_cycle=on_cycle,
                    waker=waker,
                    live_interval=live_interval,
                )
                try:
                    loop.run()
                finally:
                    stop.set()
                    if waker is not None:
                        waker.close()
                    engine.delivery_path().unlink(missing_ok=True)
                if args.json:
                    print(json.dumps({"event": "stopped", "at": _stamp()}), flush=True)
                else:
                    print(f"{_stamp()} syncengine run: stopped", flush=True)
        return 0

    return _guarded(args, action)


def _live_waker(engine: Any, stop: Any, as_json: bool) -> Any:
    """The run loop's waker: local changes always, the relay's live wait
    once the relay offers it (specs/live.md §6). Every change of delivery
    mode is logged and written where ``status`` reads it."""
    # start-up pin: status loads no syncengine.engine.live
    from syncengine.engine.live import LocalChanges, RelayWatch, Waker, write_delivery

    # start-up pin: status loads no wire.http_v1.live
    from wire.http_v1.live import DEFAULT_WAIT_SECONDS

    path = engine.delivery_path()

    def on_state(state: Any) -> None:
        write_delivery(path, state)
        if as_json:
            print(json.dumps({"event": "delivery", "at": _stamp(), **state.to_obj()}), flush=True)
        else:
            print(f"{_stamp()} delivery: {state.mode.value}: {state.reason}", flush=True)

    def make_watch() -> Any:
        return RelayWatch(
            engine.live_client, stop, wait_seconds=DEFAULT_WAIT_SECONDS, on_state=on_state
        )

    local = LocalChanges(engine.store, engine.connection.local_team)
    return Waker(stop, local, make_watch=make_watch, on_state=on_state)


def _status(args: argparse.Namespace) -> int:
    def action() -> int:
        # start-up pin: status --help loads no syncengine.engine.errors
        from syncengine.engine.errors import EngineLocked

        with _engine(args) as engine:
            status = engine.status()
            running = False
            try:
                with engine.lock():
                    pass
            except EngineLocked:
                running = True
        obj = {
            "ok": True,
            **status.to_obj(),
            "engine_running": running,
            "delivery": _delivery(engine, running),
        }
        if obj["last_failure"]:
            obj["last_failure"] = {**obj["last_failure"], "resolved": _failure_resolved(obj)}
        _emit(args, obj, _status_text(obj))
        return 0

    return _guarded(args, action)


def _delivery(engine: Any, running: bool) -> dict[str, str]:
    """Live or polling, and why (specs/live.md §9): what a running ``run``
    wrote last; without one, messages arrive only when a command syncs."""
    if not running:
        return {
            "mode": "polling",
            "reason": "no 'syncengine run' is running: messages arrive when push, pull, "
            "sync or wait run",
            "since": "",
        }
    # start-up pin: status loads no syncengine.engine.live
    from syncengine.engine.live import read_delivery

    found = read_delivery(engine.delivery_path())
    if found is None:
        return {"mode": "polling", "reason": "'syncengine run' is starting", "since": ""}
    return found


def _status_text(obj: dict[str, Any]) -> str:
    lines = [
        f"team            {obj['team']} -> {obj['remote_team_name']} ({obj['remote_team_id']})",
        f"endpoint        {obj['endpoint']} (instance {obj['server_instance_id']})",
        f"credential      {obj['credential_id']} in {obj['credential_file']}",
        f"security        {obj['security']['mode']}"
        + (
            f", age-v1 epoch {obj['security']['age_v1']['key_id']}"
            if obj["security"]["age_v1"]
            else ""
        ),
        f"cursors         push {obj['cursors']['push']}, transport {obj['cursors']['transport']}",
        f"pending push    {obj['pending_push']}",
        "quarantine      "
        + (", ".join(f"{k} {v}" for k, v in obj["quarantine"].items()) or "empty"),
        f"state           {obj['state']}" + (" (engine running)" if obj["engine_running"] else ""),
        f"delivery        {obj['delivery']['mode']}: {obj['delivery']['reason']}",
        *(f"WARNING         {warning}" for warning in obj.get("warnings", ())),
        f"last success    {obj['last_success_at'] or 'never'}",
    ]
    failure = obj["last_failure"]
    if failure and failure.get("resolved", _failure_resolved(obj)):
        lines.append(
            f"last failure    {failure['at']}: {failure['code']} (resolved: "
            + (
                f"a later sync succeeded at {obj['last_success_at']})"
                if obj["failures_since_success"] == 0
                else "the operator's resume, resync or connect --replace cleared it)"
            )
        )
    elif failure:
        lines.append(
            f"last failure    {failure['at']}: {failure['code']}: {failure['message']}"
            f" ({obj['failures_since_success']} since last success)"
        )
        lines.append(f"  remedy        {failure['remediation']}")
    if obj["integrity_halt"]:
        h = obj["integrity_halt"]
        lines.append(f"HALTED          since {h['at']}: {h['code']}: {h['message']}")
        lines.append(f"  remedy        {h['remediation']}")
    if obj["resync_required"]:
        r = obj["resync_required"]
        lines.append(
            f"RESYNC REQUIRED cursor {r['after']} is below the relay floor "
            f"{r['min_available_seq']}: {r['unavailable']} sequence number(s) were dropped by "
            "the relay's retention before this machine pulled them"
        )
        lines.append(f"  approve with  {r['command']}")
    if obj["accepted_gaps"]:
        gaps = obj["accepted_gaps"]
        last = gaps[-1]
        lines.append(
            f"accepted gaps   {len(gaps)}; last {last['gap_start']}..{last['gap_end']} "
            f"({last['unavailable']} unavailable)"
        )
    blocked = [m for m in obj["read_state"]["members"] if m["blocked"]]
    for member in blocked:
        lines.append(
            f"read-state      {member['name']} blocked: {member['blocked']['reason']} "
            f"({member['blocked']['detail']})"
        )
    if obj["blocked_messages"]:
        lines.append(f"blocked         {len(obj['blocked_messages'])} message(s) too large")
    for blocked in obj["messages_blocked"]:
        lines.append(
            f"BLOCKED         {blocked['count']} pulled message(s) {blocked['status']} "
            "(syncengine quarantine list)"
        )
        lines.append(f"  remedy        {blocked['remediation']}")
    before_join = obj["quarantine"].get("before_join", 0)
    if before_join:
        # Settled, not blocked (issue #33): said in plain words, no remedy.
        noun = "message" if before_join == 1 else "messages"
        lines.append(
            f"before joining  {before_join} {noun} from before this machine joined; "
            "they cannot be opened here"
        )
    return "\n".join(lines)


def _failure_resolved(obj: dict[str, Any]) -> bool:
    """Whether a later success, or the operator's recovery, resolved the last
    recorded failure (issue #33: status once showed it with its old remedy
    after recovery). The engine keeps the last failure for the record; a
    success resets ``failures_since_success``, and ``resume`` and ``resync``
    bring a binding stopped only by their failure back to ``ok`` (a failure
    always leaves a state other than ``ok``)."""
    return bool(obj["failures_since_success"] == 0 or obj["state"] == "ok")


def _disconnect(args: argparse.Namespace) -> int:
    def action() -> int:
        # start-up pin: status loads no syncengine.engine.disconnect
        from syncengine.engine.disconnect import disconnect_store

        done = disconnect_store(args.store, args.team)
        note = "revoked" if done.revoked else "NOT revoked (relay unreachable?): ask its operator"
        text = (
            f"team {done.local_team} disconnected from {done.endpoint}; credential "
            f"{done.credential_id} {note}; messages and read state kept"
        )
        _emit(args, done.to_obj(), text)
        return 0

    return _guarded(args, action)


def _doctor(args: argparse.Namespace) -> int:
    def action() -> int:
        # start-up pin (HTTP_STACK): only this path loads ssl
        from syncengine.engine.doctor import run_checks

        checks = run_checks(args.store, args.team)
        failed = [c for c in checks if c.verdict == "fail"]
        lines = []
        for c in checks:
            lines.append(f"{c.verdict:<5} {c.name:<13} {c.detail}")
            if c.remedy and c.verdict != "ok":
                lines.append(f"{'':<19} remedy: {c.remedy}")
        obj = {"ok": not failed, "checks": [c.to_obj() for c in checks]}
        _emit(args, obj, "\n".join(lines))
        return 1 if failed else 0

    return _guarded(args, action)


def _quarantine_list(args: argparse.Namespace) -> int:
    def action() -> int:
        # start-up pin: idle pull loads no syncengine.engine.quarantine
        from syncengine.engine.quarantine import blocked_remedy

        with _engine(args) as engine:
            rows = engine.quarantine(status=args.status, after=args.after, limit=args.limit)
            remedies = {r.status: blocked_remedy(r.status, engine.connection) for r in rows}
        more = len(rows) == args.limit
        obj = {
            "ok": True,
            "blocked": [r.to_obj() for r in rows],
            "remediation": remedies,
            "next_after": str(rows[-1].server_seq) if more else None,
        }
        lines = [
            f"{r.server_seq:>10}  {r.wire_id}  {r.status}" + (f"  ({r.reason})" if r.reason else "")
            for r in rows
        ]
        lines += [f"{status}: {remedy}" for status, remedy in remedies.items()]
        if more:
            lines.append(f"more: --after {rows[-1].server_seq}")
        _emit(args, obj, "\n".join(lines) if rows else "no blocked envelopes")
        return 0

    return _guarded(args, action)


def _resume(args: argparse.Namespace) -> int:
    def work(engine: Any) -> int:
        cleared = engine.resume()
        _emit(
            args,
            {"ok": True, "resumed": cleared},
            "integrity halt cleared; the next sync checks the relay again"
            if cleared
            else "nothing to resume: this binding is not halted",
        )
        return 0

    return _locked(args, work)


def _read_state_unblock(args: argparse.Namespace) -> int:
    def work(engine: Any) -> int:
        member_id = engine.unblock_read_state(args.member)
        _emit(
            args,
            {"ok": True, "unblocked": {"name": args.member, "member_id": member_id}},
            f"read-state sync of {args.member} ({member_id}) unblocked; the next sync "
            "either succeeds or blocks it again",
        )
        return 0

    return _locked(args, work)


def _security_show(args: argparse.Namespace) -> int:
    def action() -> int:
        with _engine(args) as engine:
            security = engine.status().to_obj()["security"]
        text = "\n".join(
            f"revision {e['local_security_revision']}: {e['minimum_security_mode']} "
            f"from sequence {e['effective_from_seq']}"
            for e in security["history"]
        )
        _emit(args, {"ok": True, "security": security}, text)
        return 0

    return _guarded(args, action)


def _security_set(args: argparse.Namespace) -> int:
    def action() -> int:
        # start-up pin: status --help loads no syncengine.engine
        from syncengine.engine import SecurityMode

        with _engine(args) as engine:
            entry = engine.set_security_mode(SecurityMode(args.mode))
        _emit(
            args,
            {
                "ok": True,
                "local_security_revision": str(entry.revision),
                "effective_from_seq": str(entry.effective_from_seq),
                "minimum_security_mode": entry.mode.value,
            },
            f"revision {entry.revision}: {entry.mode.value} from sequence "
            f"{entry.effective_from_seq}",
        )
        return 0

    return _guarded(args, action)


def _security_identity(args: argparse.Namespace) -> int:
    def action() -> int:
        with _engine(args) as engine:
            epochs = engine.set_identity(args.file, args.key_id)
        path = str(Path(args.file).absolute())
        _emit(
            args,
            {"ok": True, "identity_file": path, "epochs": list(epochs)},
            f"identity installed from {path} for epoch(s) {', '.join(epochs)}; run "
            "'syncengine reprocess' to import messages that were waiting for it",
        )
        return 0

    return _guarded(args, action)
