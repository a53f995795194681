"""``syncengine team …``: the local team registry (specs/store.md §4).

``create`` mints the immutable UUIDv7 team and member IDs, ``rename`` changes
the display name atomically with every dependent row, ``add-member`` adds
agents, ``list`` shows the registry and ``export-provisioning`` writes the
relay operator provisioning document (server/spec/v1.md "GET /v1/members").
Errors go to stderr with the store status's exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from syncengine.local_store import Store
from syncengine.store import InvalidInput, StoreError, teams
from syncengine.store.connection import read_transaction

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "team",
        help="manage the local team registry",
        description="Create, rename, list and export local teams and their members.",
    )
    parser.add_argument("--store", metavar="PATH", help="store file")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    create = actions.add_parser("create", help="create a team (mints its immutable IDs)")
    create.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS)
    create.add_argument("name")
    create.add_argument(
        "--member", action="append", default=[], metavar="AGENT", help="a member agent (repeatable)"
    )
    create.set_defaults(handler=_create)

    rename = actions.add_parser("rename", help="rename a team atomically")
    rename.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS)
    rename.add_argument("old")
    rename.add_argument("new")
    rename.set_defaults(handler=_rename)

    rename_member = actions.add_parser(
        "rename-member",
        help="rename one agent (its messages, reads and relay member ID follow)",
        description="Rename a local agent in one transaction. Use it to follow a rename "
        "on the relay: until the names agree, that member's read state does not sync. "
        "The old name stays reserved for this member: no other member of the team may "
        "take it, and renaming back to it is allowed.",
    )
    rename_member.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS)
    rename_member.add_argument("team")
    rename_member.add_argument("old")
    rename_member.add_argument("new")
    rename_member.set_defaults(handler=_rename_member)

    listing = actions.add_parser("list", help="list teams and members")
    listing.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(handler=_list)

    add = actions.add_parser("add-member", help="add member agents to a team")
    add.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS)
    add.add_argument("team")
    add.add_argument("agents", nargs="+", metavar="AGENT")
    add.set_defaults(handler=_add_member)

    export = actions.add_parser(
        "export-provisioning", help="write the relay provisioning document for a team"
    )
    export.add_argument("--store", metavar="PATH", default=argparse.SUPPRESS)
    export.add_argument("name")
    export.add_argument("--output", required=True, metavar="FILE")
    export.set_defaults(handler=_export)


def _guard(args: argparse.Namespace, action: Any) -> int:
    store = Store(args.store)
    try:
        action(store)
    except StoreError as exc:
        sys.stderr.write(f"syncengine team {args.action}: {exc}\n")
        return exc.status.exit_code
    finally:
        store.close()
    return 0


def _create(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        store.init()
        team = store.create_team(args.name, args.member)
        print(f"created team {team.name} ({team.team_id}) with {len(team.members)} member(s)")

    return _guard(args, action)


def _rename(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        team = store.rename_team(args.old, args.new)
        print(f"renamed team {args.old} to {team.name} ({team.team_id})")

    return _guard(args, action)


def _rename_member(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        store.rename_member(args.team, args.old, args.new)
        print(f"renamed {args.old} to {args.new} in team {args.team}")

    return _guard(args, action)


def _add_member(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        team = store.add_members(args.team, args.agents)
        print(f"team {team.name} now has {len(team.members)} member(s)")
        _note_awaiting(store, team.name, args.agents)

    return _guard(args, action)


def _note_awaiting(store: Any, team: str, added: list[str]) -> None:
    """On a connected team a member the relay's roster does not list yet is
    awaiting its acceptance (specs/read-state.md decision 12): say what that
    means and how it ends, once per such member just added."""
    with read_transaction(store.conn, store.path) as conn:
        waiting = set(teams.awaiting_acceptance(conn, team))
    for name in added:
        if name in waiting:
            sys.stderr.write(
                f"note: {name} is not on the relay's roster for {team} yet: it can send, "
                "but its reads stay on this machine until the relay operator adds it "
                f"(give them 'syncengine team export-provisioning {team} --output FILE')\n"
            )


def _team_json(team: Any) -> dict[str, object]:
    return {
        "team_id": team.team_id,
        "team_name": team.name,
        "members": [{"member_id": m.member_id, "name": m.name} for m in team.members],
    }


def _list(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:
        teams = store.list_teams() if store.exists() else []
        if args.json:
            print(json.dumps([_team_json(t) for t in teams], ensure_ascii=False))
            return
        for team in teams:
            names = ", ".join(m.name for m in team.members) or "(no members)"
            print(f"{team.name}\t{team.team_id}\t{names}")

    return _guard(args, action)


def _export(args: argparse.Namespace) -> int:
    def action(store: Any) -> None:

        document = store.team(args.name).provisioning_document()
        target = Path(args.output)
        directory = target.parent
        if not directory.is_dir():
            raise InvalidInput("output", f"directory {directory} does not exist")
        fd, temp = tempfile.mkstemp(prefix=".provisioning-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        print(f"wrote provisioning document for {args.name} to {target}")

    return _guard(args, action)
