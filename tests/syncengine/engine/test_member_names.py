"""Member names on a connected team, through the engine and the fake relay:
a renamed-away name stays its member's (ADR 0007 AD7-4; read-state RS-5),
read-prepare is told the local registry's names (RS-18, specs/read-state.md
decision 11), and a member the relay has not accepted yet may send in Stage 1
but uploads no read state until the relay lists it (AD7-6, decision 12)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from syncengine.engine import Engine
from syncengine.local_store import Store
from syncengine.ops.read_records import SyncReadContext
from syncengine.store.reserved_names import ReservedName
from tests.syncengine.engine.fakerelay import FakeRelay
from wire.message import Message

MakeEngine = Callable[..., Engine]


def member_id(relay: FakeRelay, name: str) -> str:
    return next(mid for mid, n in relay.roster if n == name)


def local_id(engine: Engine, name: str) -> str:
    return next(m.member_id for m in engine.store.team("crew").members if m.name == name)


def spy_contexts(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[SyncReadContext]:
    """Every read-prepare context the engine hands its store."""
    seen: list[SyncReadContext] = []
    real = engine.store.sync_prepare_read_state

    def spy(key: Any, context: SyncReadContext) -> Any:
        seen.append(context)
        return real(key, context)

    monkeypatch.setattr(engine.store, "sync_prepare_read_state", spy)
    return seen


def sent_ids(relay: FakeRelay) -> set[str]:
    """Every member ID any read-state request carried an update for."""
    return {u.member_id for request in relay.read_requests for u in request.updates}


# -- RS-18: local_agents is the local registry ------------------------------------


def test_read_prepare_is_told_the_local_registrys_names_not_the_relays(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    bob = member_id(relay, "bob")
    relay.roster = [(mid, "robert" if mid == bob else name) for mid, name in relay.roster]
    engine.store.add_members("crew", ["dave"])  # ours, not (yet) the relay's
    contexts = spy_contexts(engine, monkeypatch)
    engine.pull()
    (context,) = contexts
    assert context.local_agents == ("alice", "bob", "dave")
    assert dict(context.members)[bob] == "robert"  # the relay's names stay the members'


def test_once_the_local_name_follows_the_relays_rename_both_authorities_agree(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    bob = member_id(relay, "bob")
    relay.roster = [(mid, "robert" if mid == bob else name) for mid, name in relay.roster]
    engine.store.rename_member("crew", "bob", "robert")
    contexts = spy_contexts(engine, monkeypatch)
    report = engine.pull().read_state
    assert report is not None and report.blocked == {}
    assert contexts[0].local_agents == ("alice", "robert")


# -- AD7-4 / RS-5: the scenario on a connected team -------------------------


def test_a_connected_teams_renamed_away_name_is_refused_to_another_member(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.ids import new_uuid7

    relay.roster = sorted([*relay.roster, (new_uuid7(), "carol")])
    engine = make_engine()
    bob, carol = member_id(relay, "bob"), member_id(relay, "carol")
    engine.store.rename_member("crew", "bob", "robert")
    relay.roster = [(mid, "robert" if mid == bob else name) for mid, name in relay.roster]
    with pytest.raises(ReservedName, match="'robert'"):
        engine.store.rename_member("crew", "carol", "bob")
    report = engine.pull().read_state
    assert report is not None and report.blocked == {}  # carol's read sync is untouched
    assert local_id(engine, "carol") == carol and local_id(engine, "robert") == bob


# -- AD7-6: a member awaiting the relay's acceptance --------------------------------


def test_a_member_the_relay_has_not_accepted_may_send_in_stage_1(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    engine.store.add_members("crew", ["dave"])
    with Store(engine.store.path) as store:
        store.send("crew", "dave", "alice", "from a pending member")
    engine.sync()
    (stored,) = relay.messages
    message = Message.from_jcs(stored.envelope.blob_bytes())
    assert (message.from_agent, message.body) == ("dave", "from a pending member")


def test_a_member_awaiting_acceptance_uploads_no_read_state_until_the_relay_lists_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    engine.store.add_members("crew", ["dave"])
    dave = local_id(engine, "dave")
    with Store(engine.store.path) as store:
        store.send("crew", "alice", "dave", "for dave")
    engine.sync()  # pushed and acknowledged: the read below has a wire mapping
    with Store(engine.store.path) as store:
        (unread,) = store.list_unread("crew", "dave")
        store.mark_read_batch("crew", "dave", [unread.id])
    report = engine.sync().pull.read_state
    assert report is not None and report.blocked == {}
    assert dave not in sent_ids(relay) and dave not in relay.read_frontiers
    # The operator provisions dave from this store's export: the same member ID.
    relay.roster = sorted([*relay.roster, (dave, "dave")])
    engine.sync()
    assert relay.read_frontiers[dave] == 1  # the read kept here goes up now


def test_adding_a_member_to_a_connected_team_says_it_awaits_the_relays_acceptance(
    make_engine: MakeEngine, relay: FakeRelay, capsys: pytest.CaptureFixture[str]
) -> None:
    from syncengine.cli import main

    engine = make_engine()
    assert main(["team", "--store", str(engine.store.path), "add-member", "crew", "dave"]) == 0
    err = capsys.readouterr().err
    assert "dave is not on the relay's roster for crew yet" in err
    assert "its reads stay on this machine" in err


def test_a_member_stops_awaiting_acceptance_once_the_relay_lists_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.store.connection import read_transaction
    from syncengine.store.teams import awaiting_acceptance

    engine = make_engine()
    engine.store.add_members("crew", ["dave"])

    def waiting() -> tuple[str, ...]:
        with read_transaction(engine.store.conn, engine.store.path) as conn:
            return awaiting_acceptance(conn, "crew")

    assert waiting() == ("dave",)
    relay.roster = sorted([*relay.roster, (local_id(engine, "dave"), "dave")])
    engine.pull()
    assert waiting() == ()


def test_a_team_with_no_connection_has_nobody_awaiting_acceptance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from syncengine.cli import main

    path = str(tmp_path / "store.db")
    assert main(["team", "--store", path, "create", "solo", "--member", "ann"]) == 0
    assert main(["team", "--store", path, "add-member", "solo", "ben"]) == 0
    assert "note:" not in capsys.readouterr().err
