"""``POST /v1/read-state/sync``: monotonic member frontiers and exact reads.

docs/spec/read-state-synchronization.md "HTTP operation" (which wins over the
older text in server/spec/v1.md) fixes:

Request (closed objects throughout): ``updates`` names at most 1,000
distinct members; each ``exact_wire_ids`` list holds distinct UUIDv4s and the
request at most 1,000 in total; ``server_seq`` is a canonical sequence;
``page_limit`` is 1..1,000; ``page_after`` is null or exactly a frontier key
``{member_id, kind}`` or an exact key ``{member_id, kind, wire_id}``. An
empty ``updates`` list is the read-only form. (Whether members are active,
frontiers ≤ ``current_seq`` and wire ids resolvable needs relay state; the
relay checks those.)

Response page: the common binding, ``current_seq`` (never below the floor),
items strictly ascending by ``(member_id, kind_order, wire_id)`` with
``frontier`` before ``exact``, every frontier between ``min_available_seq``
(the effective frontier is at least the floor) and ``current_seq``, at most
``page_limit`` items, and ``next_page_after`` null exactly when ``has_more``
is false and otherwise the last item's key.

Across one polling cycle (:class:`ReadStateWalk`): each request continues
from the previous ``next_page_after``, each page sorts after its cursor,
every member contributes exactly one frontier and only after it its exact
items, and the unabsorbed exact state stays within 4,096 per member and
65,536 per team.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.limits import (
    MAX_EXACT_PER_MEMBER,
    MAX_EXACT_PER_TEAM,
    MAX_READ_EXACT_IDS,
    MAX_READ_PAGE_LIMIT,
    MAX_READ_UPDATE_MEMBERS,
)
from wire.scalars import check_uuid4, check_uuid7, format_seq, parse_seq
from wire.schema import (
    expect_bool,
    expect_int,
    expect_list,
    expect_object,
    expect_str,
    join_field,
    rebased,
)

__all__ = [
    "ExactItem",
    "FrontierItem",
    "ItemKind",
    "PageKey",
    "ReadStateItem",
    "ReadStatePage",
    "ReadStateRequest",
    "ReadStateUpdate",
    "ReadStateWalk",
]


class ItemKind(enum.StrEnum):
    """Item kinds, declared in their sort order: frontier before exact."""

    FRONTIER = "frontier"
    EXACT = "exact"

    @property
    def order(self) -> int:
        return 0 if self is ItemKind.FRONTIER else 1


def _parse_kind(value: Any, field: str) -> ItemKind:
    text = expect_str(value, field)
    try:
        return ItemKind(text)
    except ValueError:
        raise SchemaError(field, "must be 'frontier' or 'exact'") from None


@dataclass(frozen=True, slots=True, order=False)
class PageKey:
    """A keyset boundary: a frontier key has no wire id, an exact key has one."""

    member_id: str
    kind: ItemKind
    wire_id: str | None = None

    @property
    def sort_key(self) -> tuple[str, int, str]:
        # The frontier's wire component is empty, so it sorts before exacts.
        return (self.member_id, self.kind.order, self.wire_id or "")

    def validate(self, field: str) -> PageKey:
        check_uuid7(self.member_id, join_field(field, "member_id"))
        ItemKind(self.kind)
        if self.kind is ItemKind.FRONTIER:
            if self.wire_id is not None:
                raise SchemaError(join_field(field, "wire_id"), "a frontier key has no wire_id")
        else:
            check_uuid4(self.wire_id, join_field(field, "wire_id"))
        return self

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"member_id": self.member_id, "kind": self.kind.value}
        if self.wire_id is not None:
            obj["wire_id"] = self.wire_id
        return obj

    @classmethod
    def from_obj(cls, value: Any, field: str, *, closed: bool = True) -> PageKey:
        obj = expect_object(value, field, ("member_id", "kind"), ("wire_id",), closed=closed)
        kind = _parse_kind(obj["kind"], join_field(field, "kind"))
        # A key is exactly one of two shapes, so a frontier key carrying a
        # wire_id is refused even where unknown members are otherwise ignored.
        if kind is ItemKind.EXACT and "wire_id" not in obj:
            raise SchemaError(join_field(field, "wire_id"), "an exact key needs its wire_id")
        if kind is ItemKind.FRONTIER and "wire_id" in obj:
            raise SchemaError(join_field(field, "wire_id"), "a frontier key has no wire_id")
        return cls(obj["member_id"], kind, obj.get("wire_id")).validate(field)


@dataclass(frozen=True, slots=True)
class ReadStateUpdate:
    """One member's contribution: a frontier to max-merge, exact reads to union."""

    member_id: str
    server_seq: int
    exact_wire_ids: tuple[str, ...] = ()

    def validate(self, field: str) -> ReadStateUpdate:
        check_uuid7(self.member_id, join_field(field, "member_id"))
        format_seq(self.server_seq, join_field(field, "server_seq"))
        at = join_field(field, "exact_wire_ids")
        for index, wire_id in enumerate(self.exact_wire_ids):
            check_uuid4(wire_id, join_field(at, index))
        if len(set(self.exact_wire_ids)) != len(self.exact_wire_ids):
            raise SchemaError(at, "exact wire ids of one member must be distinct")
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "server_seq": format_seq(self.server_seq),
            "exact_wire_ids": list(self.exact_wire_ids),
        }

    @classmethod
    def from_obj(cls, value: Any, field: str) -> ReadStateUpdate:
        obj = expect_object(value, field, ("member_id", "server_seq", "exact_wire_ids"))
        seq = parse_seq(obj["server_seq"], join_field(field, "server_seq"))
        at = join_field(field, "exact_wire_ids")
        wire_ids = expect_list(obj["exact_wire_ids"], at, max_items=MAX_READ_EXACT_IDS)
        return cls(obj["member_id"], seq, tuple(wire_ids)).validate(field)


@dataclass(frozen=True, slots=True)
class ReadStateRequest:
    """The strict request body; ``updates=()`` is the read-only form."""

    updates: tuple[ReadStateUpdate, ...] = ()
    page_after: PageKey | None = None
    page_limit: int = MAX_READ_PAGE_LIMIT

    @property
    def is_read_only(self) -> bool:
        return not self.updates

    def validate(self, field: str = "request") -> ReadStateRequest:
        at = join_field(field, "updates")
        if len(self.updates) > MAX_READ_UPDATE_MEMBERS:
            raise SchemaError(at, f"must name at most {MAX_READ_UPDATE_MEMBERS} members")
        members: set[str] = set()
        total = 0
        for index, update in enumerate(self.updates):
            here = join_field(at, index)
            update.validate(here)
            if update.member_id in members:
                raise SchemaError(join_field(here, "member_id"), "a member appears twice")
            members.add(update.member_id)
            total += len(update.exact_wire_ids)
        if total > MAX_READ_EXACT_IDS:
            raise SchemaError(at, f"must carry at most {MAX_READ_EXACT_IDS} exact ids in total")
        if self.page_after is not None:
            self.page_after.validate(join_field(field, "page_after"))
        expect_int(
            self.page_limit, join_field(field, "page_limit"), minimum=1, maximum=MAX_READ_PAGE_LIMIT
        )
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            "updates": [update.to_obj() for update in self.updates],
            "page_after": None if self.page_after is None else self.page_after.to_obj(),
            "page_limit": self.page_limit,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "request") -> ReadStateRequest:
        obj = expect_object(value, field, ("updates", "page_after", "page_limit"))
        at = join_field(field, "updates")
        items = expect_list(obj["updates"], at, max_items=MAX_READ_UPDATE_MEMBERS)
        updates = tuple(
            ReadStateUpdate.from_obj(item, join_field(at, index))
            for index, item in enumerate(items)
        )
        raw_after = obj["page_after"]
        page_after = (
            None
            if raw_after is None
            else PageKey.from_obj(raw_after, join_field(field, "page_after"))
        )
        limit = expect_int(
            obj["page_limit"],
            join_field(field, "page_limit"),
            minimum=1,
            maximum=MAX_READ_PAGE_LIMIT,
        )
        return cls(updates, page_after, limit).validate(field)


@dataclass(frozen=True, slots=True)
class FrontierItem:
    """A member's effective remote frontier (at least the retention floor)."""

    member_id: str
    server_seq: int

    @property
    def key(self) -> PageKey:
        return PageKey(self.member_id, ItemKind.FRONTIER)

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """``key.sort_key`` without building the key (a page sorts 1,000 items)."""
        return (self.member_id, 0, "")

    def validate(self, field: str) -> FrontierItem:
        check_uuid7(self.member_id, join_field(field, "member_id"))
        format_seq(self.server_seq, join_field(field, "server_seq"))
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "kind": ItemKind.FRONTIER.value,
            "member_id": self.member_id,
            "server_seq": format_seq(self.server_seq),
        }


@dataclass(frozen=True, slots=True)
class ExactItem:
    """One unabsorbed out-of-order read by a member."""

    member_id: str
    wire_id: str

    @property
    def key(self) -> PageKey:
        return PageKey(self.member_id, ItemKind.EXACT, self.wire_id)

    @property
    def sort_key(self) -> tuple[str, int, str]:
        """``key.sort_key`` without building the key."""
        return (self.member_id, 1, self.wire_id)

    def validate(self, field: str) -> ExactItem:
        check_uuid7(self.member_id, join_field(field, "member_id"))
        check_uuid4(self.wire_id, join_field(field, "wire_id"))
        return self

    def to_obj(self) -> dict[str, Any]:
        return {"kind": ItemKind.EXACT.value, "member_id": self.member_id, "wire_id": self.wire_id}


ReadStateItem = FrontierItem | ExactItem


_FRONTIER_MEMBERS = frozenset(("kind", "member_id", "server_seq"))
_EXACT_MEMBERS = frozenset(("kind", "member_id", "wire_id"))


def _item_from_obj(value: Any) -> ReadStateItem:
    """One item, every rule of its ``validate()`` applied once, under
    relative field names (the caller rebases a failure onto the item's path).

    The shape test is inlined for the well-formed case (an object holding
    its kind's members; unknown members are ignored, as in every response);
    anything else takes :func:`expect_object` and :func:`_parse_kind`, which
    name the member that broke the rule."""
    if type(value) is dict:
        kind = value.get("kind")
        if kind == "frontier" and value.keys() >= _FRONTIER_MEMBERS:
            seq = parse_seq(value["server_seq"], "server_seq")
            return FrontierItem(check_uuid7(value["member_id"], "member_id"), seq)
        if kind == "exact" and value.keys() >= _EXACT_MEMBERS:
            member_id = check_uuid7(value["member_id"], "member_id")
            return ExactItem(member_id, check_uuid4(value["wire_id"], "wire_id"))
    obj = expect_object(value, "", ("kind", "member_id"), closed=False)
    if _parse_kind(obj["kind"], "kind") is ItemKind.FRONTIER:
        expect_object(obj, "", _FRONTIER_MEMBERS, closed=False)
    else:
        expect_object(obj, "", _EXACT_MEMBERS, closed=False)
    raise AssertionError("unreachable: a well-formed item takes the path above")


@dataclass(frozen=True, slots=True)
class ReadStatePage:
    """One canonical item page from a single relay snapshot."""

    binding: ResponseBinding
    current_seq: int
    items: tuple[ReadStateItem, ...]
    next_page_after: PageKey | None
    has_more: bool

    def validate(self, field: str = "page", *, deep: bool = True) -> ReadStatePage:
        """The page's rules; ``deep=False`` skips re-checking each item's
        scalars, which :meth:`from_obj` has just checked while parsing."""
        self.binding.validate(field)
        format_seq(self.current_seq, join_field(field, "current_seq"))
        floor = self.binding.min_available_seq
        if floor > self.current_seq:
            raise SchemaError(
                join_field(field, "min_available_seq"), "retention floor exceeds current_seq"
            )
        at = join_field(field, "items")
        if len(self.items) > MAX_READ_PAGE_LIMIT:
            raise SchemaError(at, f"must hold at most {MAX_READ_PAGE_LIMIT} items")
        current = self.current_seq
        previous: tuple[str, int, str] | None = None
        for index, item in enumerate(self.items):
            # Checked under relative names; the item's path is built on failure only.
            try:
                if not isinstance(item, FrontierItem | ExactItem):
                    raise SchemaError("", "must be a frontier or exact item")
                if deep:
                    item.validate("")
                if isinstance(item, FrontierItem) and not floor <= item.server_seq <= current:
                    raise SchemaError(
                        "server_seq", "a frontier lies between min_available_seq and current_seq"
                    )
                key = item.sort_key
                if previous is not None and key <= previous:
                    raise SchemaError(
                        "", "items must be strictly ascending by (member_id, kind, wire_id)"
                    )
                previous = key
            except SchemaError as exc:
                raise rebased(exc, join_field(at, index)) from None
        more = join_field(field, "has_more")
        cursor = join_field(field, "next_page_after")
        if not isinstance(self.has_more, bool):
            raise SchemaError(more, "must be a boolean")
        if self.has_more:
            if not self.items:
                raise SchemaError(more, "a page with more to come cannot be empty")
            if self.next_page_after != self.items[-1].key:
                raise SchemaError(cursor, "must be the key of the last item when has_more")
        elif self.next_page_after is not None:
            raise SchemaError(cursor, "must be null exactly when has_more is false")
        return self

    def check_matches(self, request: ReadStateRequest, field: str = "page") -> ReadStatePage:
        """The page answers this request: within its limit, after its cursor."""
        at = join_field(field, "items")
        if len(self.items) > request.page_limit:
            raise SchemaError(at, "holds more items than page_limit")
        after = request.page_after
        if after is not None and self.items and self.items[0].sort_key <= after.sort_key:
            raise SchemaError(join_field(at, 0), "must sort after the request's page_after")
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        cursor = self.next_page_after
        return {
            **self.binding.to_members(),
            "current_seq": format_seq(self.current_seq),
            "items": [item.to_obj() for item in self.items],
            "next_page_after": None if cursor is None else cursor.to_obj(),
            "has_more": self.has_more,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "page") -> ReadStatePage:
        members = (*BINDING_MEMBERS, "current_seq", "items", "next_page_after", "has_more")
        obj = expect_object(value, field, members, closed=False)
        binding = ResponseBinding.from_members(obj, field)
        current = parse_seq(obj["current_seq"], join_field(field, "current_seq"))
        at = join_field(field, "items")
        raw_items = expect_list(obj["items"], at, max_items=MAX_READ_PAGE_LIMIT)
        parsed: list[ReadStateItem] = []
        for index, raw in enumerate(raw_items):
            try:
                parsed.append(_item_from_obj(raw))
            except SchemaError as exc:
                raise rebased(exc, join_field(at, index)) from None
        items = tuple(parsed)
        raw_cursor = obj["next_page_after"]
        cursor = (
            None
            if raw_cursor is None
            else PageKey.from_obj(raw_cursor, join_field(field, "next_page_after"), closed=False)
        )
        has_more = expect_bool(obj["has_more"], join_field(field, "has_more"))
        return cls(binding, current, items, cursor, has_more).validate(field, deep=False)


def _item_path(index: int) -> str:
    return join_field("page.items", index)


@dataclass(slots=True)
class ReadStateWalk:
    """Checks the pages of one polling cycle as a whole, one page at a time.

    Call :meth:`accept` with each request sent and the page it returned; a
    page is handed to the driver only after ``accept`` returns. The walk
    begins at ``page_after: null`` and is complete after ``has_more: false``.
    """

    frontier_members: set[str] = field(default_factory=set)
    exact_per_member: dict[str, int] = field(default_factory=dict)
    exact_total: int = 0
    cursor: PageKey | None = None
    stream: tuple[str, str] | None = None
    complete: bool = False

    def accept(self, request: ReadStateRequest, page: ReadStatePage) -> ReadStatePage:
        if self.complete:
            raise SchemaError("page", "the walk already ended with has_more false")
        if request.page_after != self.cursor:
            raise SchemaError(
                "request.page_after", "must continue from the previous next_page_after"
            )
        stream = (page.binding.server_instance_id, page.binding.team_id)
        if self.stream is not None and stream != self.stream:
            raise SchemaError("page.team_id", "a walk cannot change server or team")
        page.check_matches(request)
        # Work on copies so a refused page leaves the walk exactly as it was.
        frontiers = set(self.frontier_members)
        per_member = dict(self.exact_per_member)
        total = self.exact_total
        for index, item in enumerate(page.items):
            if isinstance(item, FrontierItem):
                if item.member_id in frontiers:
                    raise SchemaError(
                        _item_path(index), "a member contributes exactly one frontier"
                    )
                frontiers.add(item.member_id)
                continue
            if item.member_id not in frontiers:
                raise SchemaError(
                    _item_path(index), "an exact item must follow its member's frontier"
                )
            per_member[item.member_id] = per_member.get(item.member_id, 0) + 1
            total += 1
            if per_member[item.member_id] > MAX_EXACT_PER_MEMBER:
                raise SchemaError(
                    _item_path(index), f"more than {MAX_EXACT_PER_MEMBER} exact reads for a member"
                )
            if total > MAX_EXACT_PER_TEAM:
                raise SchemaError(
                    _item_path(index), f"more than {MAX_EXACT_PER_TEAM} exact reads for the team"
                )
        self.frontier_members = frontiers
        self.exact_per_member = per_member
        self.exact_total = total
        self.stream = stream
        self.cursor = page.next_page_after
        self.complete = not page.has_more
        return page
