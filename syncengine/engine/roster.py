"""The relay's authenticated roster as a local store can hold it.

Members come only from ``GET /v1/members`` (driver-interface §2 intro: the
host never announces teams or members, and message names are never a
source). Every pull adopts the roster, so this lives apart from
:mod:`syncengine.engine.connect` and its pairing machinery, which an idle
scheduled run does not need (issue #17, start-up).
"""

from __future__ import annotations

import logging
from typing import Any

from syncengine.store.errors import InvalidInput
from syncengine.store.names import check_local_agent

__all__ = ["roster_pairs"]

_log = logging.getLogger(__name__)


def roster_pairs(document: Any) -> list[tuple[str, str]]:
    """``(member_id, name)`` of every member a local store can hold: a name
    the local agent rules refuse (a ``:`` in it) can never be on a local
    message, so that member is left out with a warning."""
    pairs: list[tuple[str, str]] = []
    for member in document.members:
        try:
            check_local_agent(member.name, "member")
        except InvalidInput:
            _log.warning("relay member %s has a name no local agent can use", member.member_id)
            continue
        pairs.append((member.member_id, member.name))
    return pairs
