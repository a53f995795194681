"""People's commands over the store: ``send``, ``inbox``, ``history``.

The storage contract's argument order (driver-interface §2): ``send TEAM
FROM TO BODY`` (``-`` reads the body from stdin, so a body never needs to
be on argv), ``inbox TEAM AGENT`` (unread, oldest first; ``--mark-read``
consumes what was shown), ``history TEAM [AGENT] [--limit N]``. Every
command takes ``--store PATH`` / ``SYNCENGINE_STORE`` and ``--json`` (one
JSON record per line, the event-log ``message_sent`` shape). Exit codes are
the store's: 0 ok, 10 missing deps, 12 corrupt, 13 runtime error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from syncengine.local_store import Store
from syncengine.store import InvalidInput, StoreError, UnknownTeam
from syncengine.store.connection import read_transaction
from syncengine.store.messages import known_team_names
from syncengine.store.names import check_local_agent, check_local_team
from syncengine.store.reserved_names import ReservedName

__all__ = ["register"]


def register(subparsers: Any) -> None:
    send = subparsers.add_parser("send", help="send a message (BODY '-' reads stdin)")
    send.add_argument("team")
    send.add_argument("sender", metavar="FROM")
    send.add_argument("recipient", metavar="TO")
    send.add_argument(
        "body",
        metavar="BODY",
        help="'-' reads the body from standard input (one final line end dropped); "
        "prefer it: a command line is visible to other local users",
    )
    _common(send)
    send.set_defaults(handler=_send)

    inbox = subparsers.add_parser("inbox", help="unread messages for an agent")
    inbox.add_argument("team")
    inbox.add_argument("agent")
    inbox.add_argument("--mark-read", action="store_true", help="consume what is shown")
    inbox.add_argument("--limit", type=int, default=None, metavar="N")
    _common(inbox)
    inbox.set_defaults(handler=_inbox)

    history = subparsers.add_parser("history", help="recent messages of a team or agent")
    history.add_argument("team")
    history.add_argument("agent", nargs="?")
    history.add_argument("--limit", type=int, default=None, metavar="N")
    _common(history)
    history.set_defaults(handler=_history)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="PATH", help="store file (default: SYNCENGINE_STORE)")
    parser.add_argument("--json", action="store_true", help="one JSON record per line")


def _guard(args: argparse.Namespace, action: Callable[[Any], None]) -> int:
    store = Store(args.store)
    try:
        _check_store_path(store.path)
        action(store)
    except StoreError as exc:
        sys.stderr.write(f"syncengine {args.command}: {exc}\n")
        return exc.status.exit_code
    finally:
        store.close()
    return 0


def _check_store_path(path: Any) -> None:
    """A read of a store that does not exist yet answers "nothing" (the
    storage contract), but a directory, or a path whose directory is
    missing, can only be a mistake: it is named instead of answered with
    silence (issue #33)."""
    if path.is_dir():
        raise InvalidInput("store", f"{path} is a directory, not a store file")
    if not path.parent.is_dir():
        raise InvalidInput("store", f"no store at {path}: directory {path.parent} does not exist")


def _print(args: argparse.Namespace, messages: list[Any]) -> None:
    for m in messages:
        if args.json:
            print(json.dumps(m.to_record(), ensure_ascii=False))
        else:
            print(f"{m.at}  {m.sender} -> {m.recipient}: {m.body}")


def _check_names(store: Any, team: str, names: tuple[str, str]) -> None:
    """A person typing ``send`` is protected from typos: once this store
    knows a team, the team must be one it has seen (registered, or named by
    a message it holds), and when the team has a roster here (``team
    create`` or the relay's members) both names must be on it. A team typed
    wrong would otherwise take the message into a team that never syncs
    (issue #33). A store that knows no team at all is refused too, with
    how to make one: every journey of the README creates or joins the team
    before its first ``send``, so a team-less store is almost always a
    mistyped ``--store`` (a new empty file) or a skipped step, and taking the
    message would strand it in a team that never syncs (specs/store.md §4).
    The contract itself interns any valid name on first use (hosts keep their
    own registry: ``syncengine driver send``), so this guard lives in the
    command only."""
    known = _known_teams(store)
    if not known:
        # A malformed name is named as such first, as the store would.
        check_local_team(team)
        check_local_agent(names[0], "from")
        check_local_agent(names[1], "to")
        raise InvalidInput("team", _no_team_yet_text(store.path, team, names))
    if team not in known:
        raise InvalidInput("team", _unknown_team_text(team, known))
    try:
        roster = {m.name for m in store.team(team).members}
    except (UnknownTeam, InvalidInput):
        return
    for field, name in zip(("from", "to"), names, strict=True):
        if roster and name not in roster:
            try:  # a name renamed away is refused naming its holder (specs/store.md §4.1)
                store.require_reader(team, name)
            except ReservedName as held:
                raise ReservedName(field, team, name, held.holder, held.holder_id) from None
            except InvalidInput:
                pass
            raise InvalidInput(
                field,
                f"team {team!r} has no member {name!r}"
                + _did_you_mean(name, sorted(roster))
                + "; add it with 'syncengine team add-member'",
            )


def _known_teams(store: Any) -> list[str]:
    if not store.exists():
        return []

    with read_transaction(store.conn, store.path) as conn:
        return known_team_names(conn)


def _unknown_team_text(team: str, known: list[str]) -> str:
    text = f"this store has no team {team!r}"
    suggestion = _did_you_mean(team, known)
    if suggestion:
        return text + suggestion
    listed = ", ".join(known[:10])
    return text + f" (its teams: {listed}); create it with 'syncengine team create'"


def _no_team_yet_text(path: Any, team: str, names: tuple[str, str]) -> str:
    """One line for a store with no team yet: what was found, and both ways
    to get the team (create it here, or join it through a relay)."""
    # start-up pin: send loads no shlex
    import shlex

    members = " ".join(f"--member {shlex.quote(n)}" for n in dict.fromkeys(names))
    return (
        f"store {path} has no team yet, so none named {team!r}; create it with "
        "'syncengine team create "
        f"{shlex.quote(team)} {members}' or join it with 'syncengine connect', "
        "then send again"
    )


def _did_you_mean(name: str, choices: list[str]) -> str:
    """`` (did you mean 'crew'?)`` for the closest choice, or nothing; difflib is
    imported on this error path only."""
    # start-up pin: send loads no difflib
    import difflib

    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _send(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        body = args.body
        if body == "-":
            try:
                body = sys.stdin.buffer.read().decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInput("body", "the body on standard input is not UTF-8 text") from None
            # ``echo text | syncengine send … -`` sends "text": the one line
            # end a shell adds is not part of the message.
            if body.endswith("\n"):
                body = body[:-2] if body.endswith("\r\n") else body[:-1]
        _check_names(store, args.team, (args.sender, args.recipient))
        message = store.send(args.team, args.sender, args.recipient, body)
        if args.json:
            print(json.dumps(message.to_record(), ensure_ascii=False))
        else:
            print(message.id)

    return _guard(args, action)


def _inbox(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        unread = store.list_unread(args.team, args.agent, args.limit)
        _print(args, unread)
        if args.mark_read and unread:
            store.mark_read_batch(args.team, args.agent, [m.id for m in unread])

    return _guard(args, action)


def _history(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        _print(args, store.history(args.team, args.agent, args.limit))

    return _guard(args, action)
