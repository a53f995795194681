"""Lying message pages from a real relay (issue #14, item 4).

Each test arms one lie on ``GET /v1/messages`` answers, lets the victim
sync, checks the client's invariants (tests/e2e/byzantine.py) and heals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.byzantine import PAGES, byzantine_scene
from tests.e2e.proxy import Fault, Response
from tests.relay.live import LiveRelay


def rewrite_page(change: Any) -> Fault:
    """Every page answer with ``change(document)`` applied (a 200 only)."""

    def rewrite(response: Response) -> bytes:
        if response.status != 200:
            return response.encode()
        document = response.json()
        change(document)
        return response.with_json(document)

    return Fault(PAGES, "rewrite", every=True, rewrite=rewrite)


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
