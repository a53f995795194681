"""``syncengine relay …``: the operator's control plane for one relay database.

Subcommands (each takes ``--database URL|PATH`` and ``--json``):

* ``init``                      create the database and its immutable server_instance_id
* ``migrate``                   bring an existing database to this release's schema
* ``serve``                     run HTTP API v1 (127.0.0.1 by default; ``/metrics``,
                                JSON or text access logs, TLS, graceful SIGTERM) and
                                the live wait extension (``--no-live``, ``--live-*``);
                                ``--workers N`` runs N processes on that one address
                                (PostgreSQL only, relay/workers.py)
* ``team apply DOC.json``       atomically replace a team's roster (creates the team)
* ``token issue --team ID``     one pairing token, printed once to stdout
* ``credential list|revoke``    device credentials (IDs only; secrets are never stored)
* ``policy set --team ID --allow none,age-v1``  append a write-policy revision
* ``retain --team ID --through SEQ``            manual retention
* ``status``                    teams, sequences, floors, members, credentials

``--database`` (alias ``--db``) is a ``postgresql://`` URL or the SQLite file
path, default ``$SYNCENGINE_RELAY_DATABASE``, then ``$SYNCENGINE_RELAY_DB``,
then ``$XDG_DATA_HOME/syncengine/relay.db``. Several ``serve`` processes may
share one PostgreSQL database (``--workers N`` starts N behind one address);
a SQLite file takes one, and ``--workers`` above 1 on it is refused.
``serve`` options that have an environment variable
(``--workers``, ``--max-connections-per-peer``, ``--request-read-timeout``,
``--retention-max-live-messages``) win over it.

No secret is ever read from argv: tokens and credentials are only ever
*printed* (once), never accepted. Exit codes: 0 success, 2 operator error
(message and remediation on stderr), 3 database unavailable.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from relay.config import (
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    MAX_CONNECTIONS_PER_PEER_ENV,
    REQUEST_READ_TIMEOUT_ENV,
    RETENTION_ENV,
    WORKERS_ENV,
    default_database,
    max_connections_per_peer,
    parse_retention,
    request_read_timeout,
    workers,
)
from relay.errors import OperatorError, RelayError
from relay.extras import install_hint
from relay.limits import (
    LIVE_MAX_WAIT_SECONDS,
    LIVE_MAX_WAITS,
    LIVE_MAX_WAITS_PER_CREDENTIAL,
    LIVE_TICK_SECONDS,
    MAX_CONNECTIONS_PER_PEER,
    MAX_WAIT_SECONDS,
    PAIRING_TOKEN_TTL_SECONDS,
    REQUEST_READ_TIMEOUT_SECONDS,
)
from relay.logformat import LOG_FORMATS
from relay.provisioning import parse_provisioning_document
from relay.secrets import hash_secret, new_pairing_token, timestamp, utc_now
from relay.storage import location
from relay.storage.base import RelayStore
from wire.errors import WireError
from wire.scalars import check_uuid7, parse_seq

EXIT_OK = 0
EXIT_OPERATOR = 2
EXIT_UNAVAILABLE = 3
#: ``--workers`` upper bound (relay/workers.py's MAX_WORKERS; that module loads uvicorn).
_MAX_WORKERS = 64

Handler = Callable[[argparse.Namespace], int]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "relay",
        help="operate a relay server (init, serve, teams, tokens, credentials, policy, retention)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="relay_action", metavar="ACTION")
    actions.required = True

    def command(name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
        _common(sub)
        sub.set_defaults(handler=_guarded(handler))
        return sub

    command("init", "create a new relay database", _init)
    command("migrate", "upgrade an existing relay database's schema", _migrate)

    serve = command("serve", "serve HTTP API v1", _serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8787, help="0 picks a free port")
    serve.add_argument(
        "--workers",
        type=_bounded(1, _MAX_WORKERS),
        default=None,
        metavar="N",
        help=f"N relay processes on this one address (PostgreSQL only; default "
        f"${WORKERS_ENV}, else 1): one listening line names every pid, SIGTERM stops "
        "them all, a worker that dies is replaced",
    )
    serve.add_argument(
        "--max-connections-per-peer",
        type=_bounded(1, 1_000_000),
        default=None,
        metavar="N",
        help=f"connections one peer address may hold; more are closed on accept "
        f"(default ${MAX_CONNECTIONS_PER_PEER_ENV}, else {MAX_CONNECTIONS_PER_PEER})",
    )
    serve.add_argument(
        "--request-read-timeout",
        type=_positive_float_seconds,
        default=None,
        metavar="SECONDS",
        help=f"time a connection has to send a whole request (headers and body) "
        f"before it is closed (default ${REQUEST_READ_TIMEOUT_ENV}, "
        f"else {REQUEST_READ_TIMEOUT_SECONDS:g})",
    )
    serve.add_argument(
        "--retention-max-live-messages",
        default=None,
        help=f"keep at most N live messages per team (or set {RETENTION_ENV})",
    )
    serve.add_argument("--busy-timeout-ms", type=int, default=5000, help=argparse.SUPPRESS)
    serve.add_argument("--no-access-log", action="store_true")
    serve.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="json",
        help="access and error log lines on stderr: one JSON object each, or short text",
    )
    serve.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve GET /metrics (Prometheus text); default: only on a loopback address",
    )
    serve.add_argument(
        "--shutdown-timeout",
        type=_positive_seconds,
        default=DEFAULT_SHUTDOWN_TIMEOUT_S,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight requests may finish (default %(default)s)",
    )
    serve.add_argument(
        "--tls-certfile", type=Path, default=None, help="serve HTTPS: PEM certificate chain"
    )
    serve.add_argument(
        "--tls-keyfile", type=Path, default=None, help="its unencrypted PEM private key (0600)"
    )
    serve.add_argument(
        "--no-live",
        action="store_true",
        help="do not offer the live wait extension (no Syncengine-Live header, no wait route)",
    )
    serve.add_argument(
        "--live-max-wait",
        type=_bounded(1, MAX_WAIT_SECONDS),
        default=LIVE_MAX_WAIT_SECONDS,
        metavar="SECONDS",
        help="answer a live wait after at most this long (default %(default)s)",
    )
    # Tests lengthen it to prove a wake came from a notification, not the tick.
    serve.add_argument(
        "--live-tick-seconds", type=float, default=LIVE_TICK_SECONDS, help=argparse.SUPPRESS
    )
    serve.add_argument(
        "--live-max-waits",
        type=_bounded(1, 1_000_000),
        default=LIVE_MAX_WAITS,
        metavar="N",
        help="open live waits this process holds at once; more are 429 (default %(default)s)",
    )
    serve.add_argument(
        "--live-max-waits-per-credential",
        type=_bounded(1, 1_000),
        default=LIVE_MAX_WAITS_PER_CREDENTIAL,
        metavar="N",
        help="open live waits per device credential; more are 429 (default %(default)s)",
    )

    team = actions.add_parser("team", help="provision teams")
    team_actions = team.add_subparsers(dest="team_action", metavar="ACTION")
    team_actions.required = True
    apply = team_actions.add_parser("apply", help="apply a provisioning document")
    _common(apply)
    apply.add_argument("document", type=Path, help="JSON: team_id, team_name, members[]")
    apply.set_defaults(handler=_guarded(_team_apply))

    token = actions.add_parser("token", help="pairing tokens")
    token_actions = token.add_subparsers(dest="token_action", metavar="ACTION")
    token_actions.required = True
    issue = token_actions.add_parser("issue", help="issue a 15-minute single-use pairing token")
    _common(issue)
    issue.add_argument("--team", required=True)
    issue.add_argument("--device-name", default=None)
    issue.set_defaults(handler=_guarded(_token_issue))

    credential = actions.add_parser("credential", help="device credentials")
    cred_actions = credential.add_subparsers(dest="credential_action", metavar="ACTION")
    cred_actions.required = True
    listing = cred_actions.add_parser("list", help="list credentials")
    _common(listing)
    listing.add_argument("--team", default=None)
    listing.set_defaults(handler=_guarded(_credential_list))
    revoke = cred_actions.add_parser("revoke", help="revoke one device credential")
    _common(revoke)
    revoke.add_argument("--team", required=True)
    revoke.add_argument("credential_id")
    revoke.set_defaults(handler=_guarded(_credential_revoke))

    policy = actions.add_parser("policy", help="team write policy")
    policy_actions = policy.add_subparsers(dest="policy_action", metavar="ACTION")
    policy_actions.required = True
    set_ = policy_actions.add_parser("set", help="append a policy revision")
    _common(set_)
    set_.add_argument("--team", required=True)
    set_.add_argument("--allow", required=True, help="comma-separated ciphers, or 'nothing'")
    set_.set_defaults(handler=_guarded(_policy_set))

    retain = command("retain", "drop live messages through a sequence", _retain)
    retain.add_argument("--team", required=True)
    retain.add_argument("--through", required=True)

    command("status", "show teams and their sequences", _status)


def _positive_seconds(value: str) -> int:
    try:
        seconds = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {value!r}") from None
    if seconds < 1:
        raise argparse.ArgumentTypeError("must be at least 1 second")
    return seconds


def _positive_float_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return seconds


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be {low}..{high}")
        return number

    return parse


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database",
        "--db",
        dest="database",
        default=None,
        help="postgresql:// URL or SQLite file path",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _guarded(handler: Handler) -> Handler:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except location.DatabaseUnreachable as exc:
            _fail(args, exc.message, exc.remediation)
            return EXIT_UNAVAILABLE
        except OperatorError as exc:
            _fail(args, exc.message, exc.remediation)
            return EXIT_OPERATOR
        except RelayError as exc:
            _fail(args, exc.message, "check that the database exists and is not locked")
            return EXIT_UNAVAILABLE

    return run


def _fail(args: argparse.Namespace, message: str, remediation: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps({"error": message, "remediation": remediation}), file=sys.stderr)
    else:
        print(f"error: {message}", file=sys.stderr)
        if remediation:
            print(f"  remedy: {remediation}", file=sys.stderr)


def _database(args: argparse.Namespace) -> str:
    return str(args.database) if args.database is not None else default_database()


def _open(args: argparse.Namespace, **kwargs: Any) -> RelayStore:
    return location.open_store(_database(args), **kwargs)


@contextmanager
def _opened(args: argparse.Namespace) -> Iterator[RelayStore]:
    """The existing database for one operator command, closed however it ends."""
    store = _open(args)
    try:
        yield store
    finally:
        store.close()


def _team_id(value: str) -> str:
    try:
        return check_uuid7(value, "--team")
    except WireError as exc:
        raise OperatorError(str(exc), "team IDs are canonical lowercase UUIDv7") from None


def _emit(args: argparse.Namespace, document: dict[str, Any], text: str) -> None:
    print(json.dumps(document, sort_keys=True) if args.json else text)


def _init(args: argparse.Namespace) -> int:
    database = _database(args)
    instance_id = location.initialize(database)
    shown = location.display(database)
    _emit(
        args,
        {"db": shown, "server_instance_id": instance_id},
        f"created {shown}\nserver_instance_id {instance_id}",
    )
    return EXIT_OK


def _migrate(args: argparse.Namespace) -> int:
    database = _database(args)
    before, after = location.migrate(database)
    shown = location.display(database)
    text = (
        f"{shown}: schema version {after} (already current)"
        if before == after
        else f"{shown}: schema version {before} -> {after}"
    )
    _emit(args, {"db": shown, "from_version": before, "to_version": after}, text)
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    try:
        from relay.http.live import LiveOptions
        from relay.server import ServeOptions, serve  # uvicorn only loads for this command
    except ImportError as exc:
        raise OperatorError(
            f"the relay server needs the 'relay' extra ({exc.name or 'starlette/uvicorn'} "
            "is not installed)",
            install_hint("relay"),
        ) from None

    raw = args.retention_max_live_messages
    retention = parse_retention(raw if raw is not None else os.environ.get(RETENTION_ENV))
    # An option wins over its environment variable; an invalid variable is
    # refused only when no option overrides it.
    group = args.workers if args.workers is not None else workers()
    database = _database(args)
    if group > 1 and not location.is_postgres(database):
        raise OperatorError(
            f"--workers {group} needs a PostgreSQL database; a SQLite file takes one process",
            "serve SQLite with one process (drop --workers / unset "
            f"{WORKERS_ENV}), or move the relay to a postgresql:// --database",
        )
    options = ServeOptions(
        host=args.host,
        port=args.port,
        access_log=not args.no_access_log,
        log_format=args.log_format,
        metrics=args.metrics,
        shutdown_timeout=args.shutdown_timeout,
        tls_certfile=args.tls_certfile,
        tls_keyfile=args.tls_keyfile,
        live=None
        if args.no_live
        else LiveOptions(
            max_wait_seconds=args.live_max_wait,
            max_waits=args.live_max_waits,
            max_waits_per_credential=args.live_max_waits_per_credential,
            tick_seconds=max(args.live_tick_seconds, 0.05),
        ),
        max_connections_per_peer=args.max_connections_per_peer
        if args.max_connections_per_peer is not None
        else max_connections_per_peer(),
        request_read_timeout=args.request_read_timeout
        if args.request_read_timeout is not None
        else request_read_timeout(),
    )

    def open_store() -> RelayStore:
        return location.open_store(
            database, busy_timeout_ms=args.busy_timeout_ms, retention_max_live_messages=retention
        )

    if group > 1:
        # lazy: an optional extra (uvicorn)
        from relay.workers import WorkerFailed, serve_workers

        try:
            serve_workers(open_store, options, group)
        except WorkerFailed as exc:
            _fail(args, exc.message, exc.remediation)
            return exc.exit_code
        return EXIT_OK
    serve(open_store(), options)
    return EXIT_OK


def _team_apply(args: argparse.Namespace) -> int:
    try:
        data = args.document.read_bytes()
    except OSError as exc:
        raise OperatorError(f"cannot read {args.document}: {exc.strerror}") from None
    document = parse_provisioning_document(data)
    with _opened(args) as store:
        summary = store.apply_provisioning(document, timestamp(utc_now()))
    verb = "created" if summary.created else "updated"
    _emit(
        args,
        asdict(summary) | {"members_revision": str(summary.members_revision)},
        f"{verb} team {summary.team_id} ({summary.team_name}): "
        f"{summary.active_members} members, members_revision {summary.members_revision}",
    )
    return EXIT_OK


def _token_issue(args: argparse.Namespace) -> int:
    team_id = _team_id(args.team)
    with _opened(args) as store:
        token = new_pairing_token()
        now = utc_now()
        issued = store.issue_pairing_token(
            team_id,
            hash_secret(token),
            args.device_name,
            timestamp(now),
            timestamp(now + timedelta(seconds=PAIRING_TOKEN_TTL_SECONDS)),
        )
    # The token goes to stdout exactly once; it is stored only as a hash.
    _emit(
        args,
        {"team_id": issued.team_id, "token": token, "expires_at": issued.expires_at},
        token,
    )
    if not args.json:
        print(f"expires at {issued.expires_at}; single use", file=sys.stderr)
    return EXIT_OK


def _credential_list(args: argparse.Namespace) -> int:
    team_id = _team_id(args.team) if args.team is not None else None
    with _opened(args) as store:
        credentials = store.list_credentials(team_id)
    rows = [asdict(c) for c in credentials]
    text = "\n".join(
        f"{c.credential_id} team={c.team_id} device={c.device_name or '-'} "
        f"paired={c.paired_at} revoked={c.revoked_at or '-'}"
        for c in credentials
    )
    _emit(args, {"credentials": rows}, text or "no credentials")
    return EXIT_OK


def _credential_revoke(args: argparse.Namespace) -> int:
    team_id = _team_id(args.team)
    try:
        credential_id = check_uuid7(args.credential_id, "credential_id")
    except WireError as exc:
        raise OperatorError(str(exc)) from None
    with _opened(args) as store:
        info = store.revoke_credential(team_id, credential_id, timestamp(utc_now()))
    _emit(args, asdict(info), f"revoked {info.credential_id} at {info.revoked_at}")
    return EXIT_OK


def _policy_set(args: argparse.Namespace) -> int:
    team_id = _team_id(args.team)
    raw = args.allow.strip()
    ciphers = [] if raw == "nothing" else [c.strip() for c in raw.split(",") if c.strip()]
    if not ciphers and raw != "nothing":
        raise OperatorError("--allow is empty", "pass ciphers, or 'nothing' to refuse all writes")
    with _opened(args) as store:
        entry = store.set_policy(team_id, ciphers)
    _emit(
        args,
        entry.to_obj(),
        f"policy_revision {entry.policy_revision} effective from {entry.effective_from_seq}: "
        f"{', '.join(entry.write_allowed_ciphers) or '(no writes)'}",
    )
    return EXIT_OK


def _retain(args: argparse.Namespace) -> int:
    team_id = _team_id(args.team)
    try:
        through = parse_seq(args.through, "--through")
    except WireError as exc:
        raise OperatorError(str(exc)) from None
    with _opened(args) as store:
        result = store.retain(team_id, through)
    document = {
        "team_id": result.team_id,
        "old_floor": str(result.old_floor),
        "new_floor": str(result.new_floor),
        "rows_removed": result.rows_removed,
    }
    _emit(
        args,
        document,
        f"floor {result.old_floor} -> {result.new_floor}; {result.rows_removed} live rows removed",
    )
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    with _opened(args) as store:
        status = store.status()
    teams = [
        asdict(t)
        | {
            "current_seq": str(t.current_seq),
            "min_available_seq": str(t.min_available_seq),
            "members_revision": str(t.members_revision),
            "policy_revision": str(t.policy_revision),
        }
        for t in status.teams
    ]
    shown = location.display(_database(args))
    lines = [f"db {shown}", f"server_instance_id {status.server_instance_id}"]
    for t in status.teams:
        lines.append(
            f"team {t.team_id} ({t.team_name}): seq {t.current_seq}, floor "
            f"{t.min_available_seq}, live {t.live_messages}, members {t.active_members}, "
            f"credentials {t.active_credentials}, ciphers {','.join(t.write_allowed_ciphers)}"
        )
    _emit(
        args,
        {
            "db": shown,
            "server_instance_id": status.server_instance_id,
            "teams": teams,
        },
        "\n".join(lines),
    )
    return EXIT_OK
