"""Hypothesis strategies for arbitrary JSON values and their single-step mutations, shared
by the page and ack property tests of this folder."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.wire.http_v1 import samples

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["0", "1", "42", "none", "frontier", "exact", samples.TEAM, samples.WIRE_1]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def mutate(doc: Any, data: st.DataObject) -> Any:
    """Replace one randomly chosen node of ``doc`` by a random JSON value."""
    if not isinstance(doc, dict | list) or not doc or data.draw(st.integers(0, 3)) == 0:
        return data.draw(json_values)
    if isinstance(doc, dict):
        key = data.draw(st.sampled_from(sorted(doc)))
        choice = data.draw(st.integers(0, 5))
        if choice == 0:
            del doc[key]
        elif choice == 1:
            doc[data.draw(st.text(max_size=6))] = data.draw(json_values)
        else:
            doc[key] = mutate(doc[key], data)
        return doc
    index = data.draw(st.integers(0, len(doc) - 1))
    doc[index] = mutate(doc[index], data)
    return doc
