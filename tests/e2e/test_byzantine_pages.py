"""Lying message pages from a real relay (issue #14, item 4).

Each test arms one lie on ``GET /v1/messages`` answers, lets the victim
sync, checks the client's invariants (tests/e2e/byzantine.py) and heals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.byzantine import PAGES, Scene, byzantine_scene
from tests.e2e.proxy import Fault, Response
from tests.support.live_relay import LiveRelay


def rewrite_page(change: Any) -> Fault:
    """Every page answer with ``change(document)`` applied (a 200 only)."""

    def rewrite(response: Response) -> bytes:
        if response.status != 200:
            return response.encode()
        document = response.json()
        change(document)
        return response.with_json(document)

    return Fault(PAGES, "rewrite", every=True, rewrite=rewrite)


def _serve_an_old_envelope_as_the_next_message(scene: Scene) -> None:
    """Pull honestly (recording what the relay sent), add two messages, then
    lie: the first new message carries the first envelope ever pulled."""
    recorded: list[dict[str, Any]] = []

    def record(response: Response) -> bytes:
        recorded.extend(response.json()["messages"])
        return response.encode()

    scene.lie(Fault(PAGES, "rewrite", every=True, rewrite=record))
    assert scene.attack().error is None
    scene.proxy.faults.clear()
    scene.write(2)

    def reuse_envelope(doc: dict[str, Any]) -> None:
        if doc["messages"]:
            doc["messages"][0]["envelope"] = recorded[0]["envelope"]

    scene.lie(rewrite_page(reuse_envelope))


def test_a_page_with_its_messages_reversed_is_refused_and_nothing_moves(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite_page(lambda doc: doc["messages"].reverse()))
        attack = scene.attack()
        assert attack.error is not None
        assert scene.cursor() == 0 and scene.bodies() == []
        scene.check()
        scene.heal()


def test_a_page_with_a_hole_is_refused_and_the_cursor_does_not_pass_it(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite_page(lambda doc: doc["messages"].pop(2)))
        assert scene.attack().error is not None
        assert scene.cursor() == 0
        scene.check()
        scene.heal()


def test_a_page_listing_one_message_twice_is_refused(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite_page(lambda doc: doc["messages"].insert(1, doc["messages"][0])))
        assert scene.attack().error is not None
        assert scene.bodies() == []
        scene.check()
        scene.heal()


def test_a_next_after_beyond_the_page_is_refused(live: LiveRelay, tmp_path: Path) -> None:
    def beyond(doc: dict[str, Any]) -> None:
        doc["next_after"] = str(int(doc["next_after"]) + 100)

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite_page(beyond))
        assert scene.attack().error is not None
        assert scene.cursor() == 0
        scene.check()
        scene.heal()


def test_an_old_page_replayed_for_a_later_cursor_is_refused(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        recorded: list[bytes] = []

        def record(response: Response) -> bytes:
            recorded.append(response.body)
            return response.encode()

        scene.lie(Fault(PAGES, "rewrite", every=True, rewrite=record))
        assert scene.attack().error is None
        first = recorded[0]
        scene.proxy.faults.clear()
        scene.write(3)
        scene.lie(Fault(PAGES, "rewrite", every=True, rewrite=lambda r: r.encode(first)))
        attack = scene.attack()
        assert attack.error is not None
        assert scene.cursor() == 6  # the replay moved nothing
        scene.check()
        scene.heal()


def test_an_endless_has_more_with_empty_pages_ends_the_pull_in_bounded_time(
    live: LiveRelay, tmp_path: Path
) -> None:
    def empty_but_more(doc: dict[str, Any]) -> None:
        after = int(doc["messages"][0]["server_seq"]) - 1 if doc["messages"] else None
        doc["messages"] = []
        if after is not None:
            doc["next_after"] = str(after)
        doc["has_more"] = True

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite_page(empty_but_more))
        attack = scene.attack()
        assert attack.seconds < 15
        assert attack.error is not None
        assert scene.cursor() == 0
        scene.check()
        scene.heal()


def test_a_known_message_re_served_at_a_new_sequence_halts_and_skips_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        assert scene.attack().error is None
        known = scene.genuine()[0]
        scene.write(2)

        def replace_first(doc: dict[str, Any]) -> None:
            if doc["messages"]:
                doc["messages"][0]["id"] = known[1]

        scene.lie(rewrite_page(replace_first))
        attack = scene.attack()
        assert attack.state == "halted"
        assert scene.cursor() == 6
        scene.check()
        scene.heal()


def test_a_held_plaintext_envelope_re_served_under_a_new_wire_id_is_undetectable(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        _serve_an_old_envelope_as_the_next_message(scene)
        # ``none`` envelopes are deterministic and carry no wire ID: the copy
        # looks like a second genuine "m0" (specs/engine.md §9: what
        # plaintext cannot detect) — and the genuine message at that sequence
        # is never fetched. e2ee-required teams are not exposed to this.
        assert scene.attack().error is None
        assert scene.bodies().count("m0") == 2


def test_a_sealed_envelope_replayed_under_a_new_wire_id_halts_before_the_genuine_one(
    live: LiveRelay, tmp_path: Path
) -> None:
    """#14: an old age-v1 envelope re-served under a new wire ID at the
    sequence of a genuine message must neither become a second copy of the
    old message nor let the cursor pass the genuine one."""
    with byzantine_scene(live, tmp_path, sealed=True) as scene:
        _serve_an_old_envelope_as_the_next_message(scene)
        attack = scene.attack()
        assert attack.state == "halted"
        assert scene.cursor() == 6
        scene.check()
        scene.heal()
