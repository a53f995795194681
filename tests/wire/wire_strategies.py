"""Hypothesis strategies shared by the wire codec tests.

Generators build valid values from the spec's rules directly (never by
asking the code under test), so a property failure points at the codec.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from wire.limits import MAX_NAME_SCALARS, MAX_SAFE_INTEGER
from wire.message import Message

#: Modest, deterministic-enough budget for the whole wire suite.
PROPERTY = settings(max_examples=100, deadline=None)

#: Unicode scalar values: every code point except the surrogates.
scalar_chars = st.characters(exclude_categories=["Cs"])

json_text = st.text(alphabet=scalar_chars, max_size=24)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)

#: I-JSON values: finite numbers, safe integers, strings without surrogates.
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(json_text, children, max_size=5)
    ),
    max_leaves=25,
)

_AGENT_FORBIDDEN = set('./\\"[]')


def _is_agent_name(text: str) -> bool:
    return (
        1 <= len(text) <= MAX_NAME_SCALARS
        and not text.startswith("-")
        and not any(char in _AGENT_FORBIDDEN for char in text)
        and not any(ord(char) < 0x20 or ord(char) == 0x7F for char in text)
        and unicodedata.normalize("NFC", text) == text
    )


agent_names = (
    st.text(
        alphabet=st.characters(exclude_categories=("Cs", "Cc"), exclude_characters='./\\"[]'),
        min_size=1,
        max_size=24,
    )
    .map(lambda text: unicodedata.normalize("NFC", text))
    .filter(_is_agent_name)
)


def spell_timestamp(moment: datetime) -> str:
    """Canonical ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` text, written independently."""
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}."
        f"{moment.microsecond:06d}Z"
    )


utc_datetimes = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)
).map(lambda naive: naive.replace(tzinfo=UTC))

timestamps = utc_datetimes.map(spell_timestamp)

bodies = st.text(alphabet=scalar_chars, min_size=1, max_size=200)

messages = st.builds(
    Message, body=bodies, created_at=timestamps, from_agent=agent_names, to_agent=agent_names
)


def message_obj(message: Message) -> dict[str, Any]:
    return {
        "body": message.body,
        "created_at": message.created_at,
        "from_agent": message.from_agent,
        "to_agent": message.to_agent,
    }
