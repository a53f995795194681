"""Local read state against a model: exact reads plus a frontier that never
jumps a hole (read-state-synchronization.md "Contiguous-prefix and
exact-read rules", "Local consume contract")."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.local_store import Store
from syncengine.store import InvalidInput

AGENTS = ("alice", "bob", "carol")

op = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(AGENTS), st.sampled_from(AGENTS)),
    st.tuples(st.just("mark"), st.sampled_from(AGENTS), st.lists(st.integers(0, 30), max_size=3)),
    st.tuples(
        st.just("consume"),
        st.sampled_from(AGENTS),
        st.integers(0, 30),
        st.lists(st.integers(0, 30), max_size=3),
    ),
)


@settings(max_examples=30, deadline=None)
@given(st.lists(op, min_size=1, max_size=14))
def test_unread_and_frontier_follow_the_exact_read_model(ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
        store.init()
        store.create_team("dev", list(AGENTS))
        sent: list[tuple[str, str]] = []  # (id, recipient), index = seq - 1
        read: set[tuple[str, int]] = set()
        frontier = dict.fromkeys(AGENTS, 0)
        for step in ops:
            if step[0] == "send":
                sent.append((store.send("dev", str(step[1]), str(step[2]), "m").id, str(step[2])))
                continue
            agent = str(step[1])
            mine = [i for i, (_, to) in enumerate(sent, 1) if to == agent]
            chosen = [mine[k % len(mine)] for k in step[-1]] if mine else []  # type: ignore[attr-defined]
            chosen_ids = [sent[s - 1][0] for s in chosen]
            if step[0] == "mark":
                if not chosen_ids:
                    continue
                store.mark_read_batch("dev", agent, chosen_ids)
                read |= {(agent, s) for s in chosen}
            else:
                cursor = min(int(step[2]), len(sent))  # type: ignore[call-overload]
                store.read_cursor_consume("dev", agent, str(cursor), chosen_ids)
                read |= {(agent, s) for s in chosen}
                holes = [s for s in mine if s <= cursor and (agent, s) not in read]
                if not holes:
                    # a fully covered scan reaches the cursor
                    assert int(store.read_cursor_get("dev", agent)) >= cursor
            for who in AGENTS:
                f = int(store.read_cursor_get("dev", who))
                assert f >= frontier[who], "the frontier moved backwards"
                frontier[who] = f
                assert f <= len(sent)
                addressed = [s for s, (_, to) in enumerate(sent, 1) if to == who]
                assert all((who, s) in read for s in addressed if s <= f), "jumped a hole"
                expected = [sent[s - 1][0] for s in addressed if (who, s) not in read]
                assert [m.id for m in store.list_unread("dev", who)] == expected


def test_a_later_exact_read_is_kept_while_the_hole_before_it_pins_the_frontier(
    store: Store,
) -> None:
    m = [store.send("dev", "alice", "bob", str(i)).id for i in range(3)]
    store.mark_read_batch("dev", "bob", [m[2]])
    assert store.read_cursor_get("dev", "bob") == "0"
    store.mark_read_batch("dev", "bob", [m[0]])
    assert store.read_cursor_get("dev", "bob") == "1"
    store.mark_read_batch("dev", "bob", [m[1]])  # the hole fills: prefix compacts to 3
    assert store.read_cursor_get("dev", "bob") == "3"
    assert store.list_unread("dev", "bob") == []


def test_marking_another_agents_message_affects_nobody_else(store: Store) -> None:
    to_carol = store.send("dev", "alice", "carol", "c").id
    store.mark_read_batch("dev", "bob", [to_carol])
    assert [m.id for m in store.list_unread("dev", "carol")] == [to_carol]
    assert store.read_cursor_get("dev", "carol") == "0"


def test_marking_an_unknown_id_is_accepted_and_changes_no_unread_set(store: Store) -> None:
    mine = store.send("dev", "alice", "bob", "b").id
    store.mark_read_batch("dev", "bob", ["no-such-message"])
    assert [m.id for m in store.list_unread("dev", "bob")] == [mine]


def test_an_empty_id_list_is_a_successful_no_op(store: Store) -> None:
    store.send("dev", "alice", "bob", "b")
    store.mark_read_batch("dev", "bob", [])
    assert len(store.list_unread("dev", "bob")) == 1


def test_one_bad_id_in_a_batch_marks_none_of_them(store: Store) -> None:
    good = store.send("dev", "alice", "bob", "g").id
    with pytest.raises(InvalidInput):
        store.mark_read_batch("dev", "bob", [good, "BAD\nID"])
    assert [m.id for m in store.list_unread("dev", "bob")] == [good]


def test_consume_with_a_cursor_beyond_the_tip_is_bounded_by_the_tip(store: Store) -> None:
    store.send("dev", "alice", "carol", "x")
    store.read_cursor_consume("dev", "bob", "99", [])
    assert store.read_cursor_get("dev", "bob") == "1"
    later = store.send("dev", "alice", "bob", "y").id
    assert [m.id for m in store.list_unread("dev", "bob")] == [later]


def test_watch_after_never_returns_a_message_its_recipient_already_read(store: Store) -> None:
    m = [store.send("dev", "alice", "bob", str(i)).id for i in range(3)]
    store.mark_read_batch("dev", "bob", [m[2]])  # exact read beyond the hole at m[0]
    result = store.watch_after("0", ["dev:bob"])
    assert [x.id for x in result.messages] == m[:2]
    assert result.cursor == "3"


@pytest.mark.parametrize("token", ["", "abc", "-1", "007"])
def test_watch_after_with_a_token_it_never_issued_redelivers_from_the_start(
    store: Store, token: str
) -> None:
    sent = store.send("dev", "alice", "bob", "x").id
    assert [x.id for x in store.watch_after(token, ["dev:bob"]).messages] == [sent]


def test_watch_after_beyond_the_tip_resumes_from_the_tip(store: Store) -> None:
    store.send("dev", "alice", "bob", "x")
    result = store.watch_after("5", ["dev:bob"])
    assert (result.messages, result.cursor) == ((), "1")
    later = store.send("dev", "alice", "bob", "y").id
    assert [x.id for x in store.watch_after(result.cursor, ["dev:bob"]).messages] == [later]
