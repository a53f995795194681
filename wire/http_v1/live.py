"""Our Stage 3 extension: the live wait (specs/live.md).

A team-scoped long poll that answers as soon as the team's committed head
passes what the client already has, or its read-state revision does, or
its time is up. It carries sequence numbers only — the committed head and
a read-state revision — never a recipient, a body or a wire ID, so the
relay learns nothing from it it did not hold already
(read-state-synchronization.md "Explicitly out of scope" names such a
content-free notification layer as Stage 3).

It is discoverable without touching any v1 document an upstream client
parses strictly: a relay that offers it stamps :data:`LIVE_HEADER` on its
``GET /v1/capabilities`` answer; a relay that does not (the upstream
relay) simply lacks the header, and clients keep polling.

The request is ``GET`` :data:`LIVE_WAIT` with the v1 team headers (protocol
version, team, bearer credential) and exactly three query members:

- ``after``: the committed head the client holds (a canonical sequence);
- ``read_after``: the read-state revision it last saw (a canonical
  sequence, ``0`` before any);
- ``wait``: how long it will wait, whole seconds 0..:data:`MAX_WAIT_SECONDS`
  (the relay may answer sooner, never later than its own bound).

The answer is the v1 binding members plus ``current_seq``,
``read_revision`` and ``woken`` (true when a number passed the client's,
false when the time ran out). A client trusts none of it: a wake is only a
hint to pull (specs/live.md §5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.headers import LIVE_HEADER, LIVE_HEADER_VALUE
from wire.scalars import format_seq, parse_seq
from wire.schema import expect_object, join_field

__all__ = [
    "DEFAULT_WAIT_SECONDS",
    "LIVE_HEADER",
    "LIVE_HEADER_VALUE",
    "LIVE_WAIT",
    "MAX_WAIT_SECONDS",
    "LiveWaitAnswer",
    "LiveWaitQuery",
]

#: The wait's path: outside ``/v1/`` so no v1 route or document changes.
LIVE_WAIT = "/x-syncengine/live/v1/wait"
#: The longest wait a client may ask for; the relay's own bound may be lower.
#: Below the 60 s idle timeout common reverse proxies apply, so an answer
#: (the long poll's heartbeat) always arrives before a proxy gives up.
MAX_WAIT_SECONDS = 55
#: What a client asks for when it has no reason to ask otherwise.
DEFAULT_WAIT_SECONDS = 25

_QUERY_MEMBERS = frozenset({"after", "read_after", "wait"})
_ANSWER_MEMBERS = (*BINDING_MEMBERS, "current_seq", "read_revision", "woken")


@dataclass(frozen=True, slots=True)
class LiveWaitQuery:
    """What the client holds and how long it waits."""

    after: int
    read_after: int
    wait: int = DEFAULT_WAIT_SECONDS

    def validate(self) -> LiveWaitQuery:
        format_seq(self.after, "after")
        format_seq(self.read_after, "read_after")
        if isinstance(self.wait, bool) or not isinstance(self.wait, int):
            raise SchemaError("wait", "must be whole seconds")
        if not 0 <= self.wait <= MAX_WAIT_SECONDS:
            raise SchemaError("wait", f"must be 0..{MAX_WAIT_SECONDS} seconds")
        return self

    def to_params(self) -> dict[str, str]:
        self.validate()
        return {
            "after": format_seq(self.after),
            "read_after": format_seq(self.read_after),
            "wait": str(self.wait),
        }

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> LiveWaitQuery:
        """Strict: exactly the three members, canonical decimals."""
        unknown = sorted(set(params) - _QUERY_MEMBERS)
        if unknown:
            raise SchemaError(unknown[0], "is not a member of the live wait query")
        for name in sorted(_QUERY_MEMBERS):
            if name not in params:
                raise SchemaError(name, "is required")
        wait_text = params["wait"]
        if not (wait_text.isascii() and wait_text.isdigit()) or wait_text != str(int(wait_text)):
            raise SchemaError("wait", "must be whole seconds in canonical decimal")
        query = cls(
            parse_seq(params["after"], "after"),
            parse_seq(params["read_after"], "read_after"),
            int(wait_text),
        )
        return query.validate()


@dataclass(frozen=True, slots=True)
class LiveWaitAnswer:
    """The relay's answer: the stream, its head and read-state revision."""

    binding: ResponseBinding
    current_seq: int
    read_revision: int
    woken: bool

    def validate(self, field: str = "live") -> LiveWaitAnswer:
        self.binding.validate(field)
        format_seq(self.current_seq, join_field(field, "current_seq"))
        format_seq(self.read_revision, join_field(field, "read_revision"))
        if not isinstance(self.woken, bool):
            raise SchemaError(join_field(field, "woken"), "must be a boolean")
        if self.binding.min_available_seq > self.current_seq:
            raise SchemaError(
                join_field(field, "min_available_seq"), "the floor cannot pass current_seq"
            )
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            **self.binding.to_members(),
            "current_seq": format_seq(self.current_seq),
            "read_revision": format_seq(self.read_revision),
            "woken": self.woken,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "live") -> LiveWaitAnswer:
        obj = expect_object(value, field, _ANSWER_MEMBERS)
        woken = obj["woken"]
        if not isinstance(woken, bool):
            raise SchemaError(join_field(field, "woken"), "must be a boolean")
        answer = cls(
            ResponseBinding.from_members(obj, field),
            parse_seq(obj["current_seq"], join_field(field, "current_seq")),
            parse_seq(obj["read_revision"], join_field(field, "read_revision")),
            woken,
        )
        return answer.validate(field)
