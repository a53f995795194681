"""HTTP bodies: the structure bound before decoding (issue #14)."""

from __future__ import annotations

import json

import pytest

from tests.wire.http_v1 import samples
from wire.errors import CanonicalJsonError
from wire.http_v1.body import check_structure, decode_request_body, decode_response_body
from wire.http_v1.limits import MAX_JSON_STRUCTURE, MAX_POLICY_HISTORY


def _nested_lists(count: int) -> bytes:
    """``{"junk":[[],[],…]}`` with ``count`` structural characters in all."""
    inner = (count - 2) // 2  # each "[]," adds a "[" and a ","; the outer "{" and "[" two
    return b'{"junk":[' + b"[]," * (inner - 1) + b"[]]}"


def test_a_body_at_the_structure_bound_decodes() -> None:
    data = _nested_lists(MAX_JSON_STRUCTURE)
    assert data.count(b"[") + data.count(b"{") + data.count(b",") <= MAX_JSON_STRUCTURE
    assert len(decode_response_body(data)["junk"]) > 100_000


@pytest.mark.parametrize("decode", [decode_response_body, decode_request_body])
def test_a_body_over_the_structure_bound_is_refused_before_decoding(decode: object) -> None:
    data = _nested_lists(MAX_JSON_STRUCTURE + 10)
    with pytest.raises(CanonicalJsonError, match="arrays, objects and separators"):
        decode(data)  # type: ignore[operator]


def test_the_largest_genuine_document_is_far_below_the_bound() -> None:
    """A capabilities snapshot with the most policy entries v1 allows."""
    caps = samples.capabilities("7")
    entry = caps["policy_history"][-1]
    caps["policy_history"] = [entry] * MAX_POLICY_HISTORY
    data = json.dumps(caps).encode()
    check_structure(data)
    assert data.count(b",") * 4 < MAX_JSON_STRUCTURE
