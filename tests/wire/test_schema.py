"""Strict JSON shape checks (wire/schema.py)."""

from __future__ import annotations

from typing import Any

import pytest

from wire.errors import SchemaError
from wire.schema import (
    expect_bool,
    expect_int,
    expect_list,
    expect_object,
    expect_str,
    join_field,
)


@pytest.mark.parametrize(
    ("parent", "child", "expected"),
    [("envelope", "blob", "envelope.blob"), ("", "blob", "blob"), ("messages", 3, "messages[3]")],
)
def test_join_field_builds_dotted_paths(parent: str, child: str | int, expected: str) -> None:
    assert join_field(parent, child) == expected


def test_expect_object_returns_the_object_unchanged() -> None:
    value = {"a": 1, "b": None}
    assert expect_object(value, "x", ["a"], ["b"]) is value


@pytest.mark.parametrize("value", [[], "a", 1, None, True, [("a", 1)]])
def test_expect_object_rejects_non_objects(value: Any) -> None:
    with pytest.raises(SchemaError, match="JSON object") as caught:
        expect_object(value, "body", ["a"])
    assert caught.value.field == "body"


def test_expect_object_names_a_missing_required_member() -> None:
    with pytest.raises(SchemaError, match="missing") as caught:
        expect_object({"a": 1}, "req", ["a", "b"])
    assert caught.value.field == "req.b"


def test_expect_object_rejects_unknown_members_when_closed() -> None:
    with pytest.raises(SchemaError, match="unknown") as caught:
        expect_object({"a": 1, "extra": 2}, "req", ["a"])
    assert caught.value.field == "req.extra"


def test_expect_object_accepts_optional_members_when_closed() -> None:
    assert expect_object({"a": 1, "o": 2}, "req", ["a"], ["o"]) == {"a": 1, "o": 2}


def test_expect_object_tolerates_unknown_members_when_open() -> None:
    assert expect_object({"a": 1, "new": 2}, "resp", ["a"], closed=False) == {"a": 1, "new": 2}


def test_expect_object_still_requires_members_when_open() -> None:
    with pytest.raises(SchemaError):
        expect_object({"new": 2}, "resp", ["a"], closed=False)


def test_expect_object_field_names_are_case_sensitive() -> None:
    with pytest.raises(SchemaError):
        expect_object({"A": 1}, "req", ["a"])


@pytest.mark.parametrize("value", [1, None, b"s", ["s"]])
def test_expect_str_rejects_non_strings(value: Any) -> None:
    with pytest.raises(SchemaError, match="JSON string"):
        expect_str(value, "f")


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_expect_int_rejects_booleans_floats_and_strings(value: Any) -> None:
    with pytest.raises(SchemaError, match="JSON integer"):
        expect_int(value, "f")


@pytest.mark.parametrize("value", [1, 5, 10])
def test_expect_int_bounds_are_inclusive(value: int) -> None:
    assert expect_int(value, "f", minimum=1, maximum=10) == value


@pytest.mark.parametrize(("value", "rule"), [(0, "at least 1"), (11, "at most 10")])
def test_expect_int_rejects_values_outside_bounds(value: int, rule: str) -> None:
    with pytest.raises(SchemaError, match=rule):
        expect_int(value, "f", minimum=1, maximum=10)


@pytest.mark.parametrize("value", [0, 1, "true", None])
def test_expect_bool_rejects_non_booleans(value: Any) -> None:
    with pytest.raises(SchemaError):
        expect_bool(value, "f")


@pytest.mark.parametrize("value", [(), "[]", {}, None])
def test_expect_list_rejects_non_arrays(value: Any) -> None:
    with pytest.raises(SchemaError, match="JSON array"):
        expect_list(value, "f")


def test_expect_list_enforces_minimum_items() -> None:
    with pytest.raises(SchemaError, match="at least 1"):
        expect_list([], "messages", min_items=1)


def test_expect_list_enforces_maximum_items() -> None:
    with pytest.raises(SchemaError, match="at most 2"):
        expect_list([1, 2, 3], "messages", max_items=2)


def test_expect_list_accepts_the_bounds_exactly() -> None:
    assert expect_list([1, 2], "messages", min_items=2, max_items=2) == [1, 2]


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "null"), (True, "a boolean"), (1.5, "a number"), ([], "an array"), ({}, "an object")],
)
def test_errors_name_the_json_type_received(value: Any, name: str) -> None:
    with pytest.raises(SchemaError, match=name):
        expect_str(value, "f")
