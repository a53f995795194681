"""``read_policies``: one page's policies, shared when no boundary splits it.

The page-wide shortcut must give, sequence by sequence, exactly what
``read_policy`` gives (v1.md "Pull state layers": the policy effective at
each ``server_seq``), whichever boundaries the two histories hold.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from syncengine.engine import SecurityHistory, SecurityMode
from syncengine.engine.evaluation import read_policies
from syncengine.engine.security import read_policy
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.capabilities import Capabilities, PolicyEntry

SID = "0190a1b2-c3d4-7e5f-8a6b-000000000001"
TID = "0190a1b2-c3d4-7e5f-8a6b-000000000002"
CIPHERS = st.sampled_from([("none",), ("age-v1",), ("none", "age-v1")])


def caps(boundaries: list[int], ciphers: list[tuple[str, ...]]) -> Capabilities:
    entries = tuple(
        PolicyEntry(i, start, (1,), c)
        for i, (start, c) in enumerate(zip(boundaries, ciphers, strict=False))
    )
    return Capabilities(ResponseBinding(SID, TID, "t", 0), 10_000, 1024 * 1024, entries)


def local(boundaries: list[int]) -> SecurityHistory:
    history = SecurityHistory.initial(SecurityMode.PLAINTEXT_ALLOWED)
    modes = (SecurityMode.E2EE_REQUIRED, SecurityMode.PLAINTEXT_ALLOWED)
    for index, boundary in enumerate(boundaries):
        history = history.appended(modes[index % 2], boundary)
    return history


@given(
    st.lists(st.integers(1, 60), min_size=1, max_size=5, unique=True).map(sorted),
    st.lists(CIPHERS, min_size=5, max_size=5),
    st.lists(st.integers(2, 60), max_size=4, unique=True).map(sorted),
    st.integers(1, 70),
    st.integers(0, 30),
    st.booleans(),
)
def test_page_policies_are_each_sequences_own(
    server: list[int],
    ciphers: list[tuple[str, ...]],
    boundaries: list[int],
    first: int,
    count: int,
    shuffled: bool,
) -> None:
    c, history = caps(server, ciphers), local(boundaries)
    seqs = list(range(first, first + count))
    if shuffled:
        seqs.reverse()
    assert read_policies(c, history, seqs) == [read_policy(c, history, s) for s in seqs]


def test_a_page_across_a_boundary_changes_policy_inside_it() -> None:
    c = caps([1, 20], [("none", "age-v1"), ("age-v1",)])
    history = local([])
    policies = read_policies(c, history, list(range(15, 25)))
    assert [p.allowed_ciphers for p in policies[:5]] == [frozenset({"none", "age-v1"})] * 5
    assert [p.allowed_ciphers for p in policies[5:]] == [frozenset({"age-v1"})] * 5


def test_a_policy_that_returns_between_a_pages_ends_is_still_seen() -> None:
    # A B A: the first and last sequence share a policy, the middle does not.
    c = caps([1, 10, 12], [("none",), ("age-v1",), ("none",)])
    history = local([])
    policies = read_policies(c, history, list(range(5, 15)))
    assert policies == [read_policy(c, history, s) for s in range(5, 15)]
    assert policies[6].allowed_ciphers == frozenset({"age-v1"})
