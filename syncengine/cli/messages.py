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
    from syncengine.store import Store, StoreError

    store = Store(args.store)
    try:
        action(store)
    except StoreError as exc:
        sys.stderr.write(f"syncengine {args.command}: {exc}\n")
        return exc.status.exit_code
    finally:
        store.close()
    return 0


def _print(args: argparse.Namespace, messages: list[Any]) -> None:
    for m in messages:
        if args.json:
            print(json.dumps(m.to_record(), ensure_ascii=False))
        else:
            print(f"{m.at}  {m.sender} -> {m.recipient}: {m.body}")


def _check_roster(store: Any, team: str, names: tuple[str, str]) -> None:
    """A person typing ``send`` is protected from typos: when the team has a
    roster here (``team create`` or the relay's members), both names must be
    on it. The storage contract itself takes any valid names (hosts keep
    their own registry), so this guard lives in the command only."""
    from syncengine.store import InvalidInput, UnknownTeam

    if not store.exists():
        return
    try:
        roster = {m.name for m in store.team(team).members}
    except (UnknownTeam, InvalidInput):
        return
    for field, name in zip(("from", "to"), names, strict=True):
        if roster and name not in roster:
            raise InvalidInput(
                field,
                f"team {team!r} has no member {name!r}; add it with 'syncengine team add-member'",
            )


def _send(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        _check_roster(store, args.team, (args.sender, args.recipient))
        body = args.body
        if body == "-":
            from syncengine.store import InvalidInput

            try:
                body = sys.stdin.buffer.read().decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidInput("body", "the body on standard input is not UTF-8 text") from None
            # ``echo text | syncengine send … -`` sends "text": the one line
            # end a shell adds is not part of the message.
            if body.endswith("\n"):
                body = body[:-2] if body.endswith("\r\n") else body[:-1]
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
