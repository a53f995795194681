"""An in-process fake relay for unit tests of the engine (an ``httpx`` transport).

It speaks just enough HTTP v1 — health, pairing exchange, revoke,
capabilities with a policy history, POST and GET messages with a floor — to
drive the cycle without a process, and every document is built with the
``wire.http_v1`` builders so it is valid by construction. Tests change
policy, lower the request-size cap, raise the floor or queue canned answers
(``inject``) for the next requests matching a method and path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from syncengine.ids import new_uuid7
from wire.envelope import Envelope
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.capabilities import Capabilities, PolicyEntry
from wire.http_v1.errors import ErrorResponse
from wire.http_v1.members import Member, MembersDocument
from wire.http_v1.messages import (
    Disposition,
    MessageBatch,
    MessagePage,
    PulledMessage,
    PushAck,
    PushResponse,
)
from wire.http_v1.read_state import (
    ExactItem,
    FrontierItem,
    ReadStatePage,
    ReadStateRequest,
)

HEADERS = {"Agmsg-Protocol-Version": "1", "Content-Type": "application/json"}
SECRET = "fake-bearer-credential-0123456789"
TOKEN = "fake-pairing-token-abcdef"
RECEIVED_AT = "2026-07-20T06:30:01.000000Z"


def reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, content=json.dumps(obj).encode(), headers={**HEADERS, **(headers or {})}
    )


def proxy_page(status: int = 503) -> httpx.Response:
    """A reverse proxy's HTML error page: no protocol header (upstream #814)."""
    return httpx.Response(
        status,
        content=b"<html><h1>503 Service Unavailable</h1></html>",
        headers={"Content-Type": "text/html"},
    )


@dataclass
class Stored:
    seq: int
    id: str
    envelope: Envelope


@dataclass
class FakeRelay:
    server_instance_id: str = field(default_factory=new_uuid7)
    team_id: str = field(default_factory=new_uuid7)
    team_name: str = "fake-team"
    max_blob_bytes: int = 1024 * 1024
    #: Bodies over this many bytes get 413 (the real cap is 2 MiB).
    max_request_bytes: int = 2 * 1024 * 1024
    floor: int = 0
    history: list[PolicyEntry] = field(
        default_factory=lambda: [PolicyEntry(0, 1, (1,), ("none", "age-v1"))]
    )
    messages: list[Stored] = field(default_factory=list)
    by_id: dict[str, Stored] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    posted_batches: list[int] = field(default_factory=list)
    injected: list[tuple[str, str, Callable[[], httpx.Response]]] = field(default_factory=list)
    credential_id: str = field(default_factory=new_uuid7)
    revoked: bool = False
    #: The team's roster as ``GET /v1/members`` serves it: (member_id, name).
    roster: list[tuple[str, str]] = field(
        default_factory=lambda: sorted([(new_uuid7(), "alice"), (new_uuid7(), "bob")])
    )

    #: Read state per member ID: the stored frontier and the exact wire IDs.
    read_frontiers: dict[str, int] = field(default_factory=dict)
    read_exact: dict[str, set[str]] = field(default_factory=dict)
    read_requests: list[ReadStateRequest] = field(default_factory=list)
    #: The live wait (specs/live.md): offered, and how far past the true
    #: head its answers lie (0: honest). It answers at once (no waiting here).
    live: bool = True
    live_lie: int = 0
    read_revision: int = 0

    # -- test controls -----------------------------------------------------------

    @property
    def current_seq(self) -> int:
        return self.messages[-1].seq if self.messages else self.floor

    def set_policy(self, *ciphers: str) -> None:
        """Append a policy revision effective from the next sequence."""
        boundary = self.current_seq + 1
        revision = self.history[-1].policy_revision + 1
        entry = PolicyEntry(revision, boundary, (1,), tuple(ciphers))
        if self.history[-1].effective_from_seq == boundary:
            self.history[-1] = entry
        else:
            self.history.append(entry)

    def inject(self, method: str, path: str, *answers: Callable[[], httpx.Response]) -> None:
        """Answer the next requests to (method, path) with ``answers``, in order."""
        for answer in answers:
            self.injected.append((method, path, answer))

    def add_foreign(self, envelope: Envelope, wire_id: str) -> int:
        """Store a message as another device would (no policy check: a test
        may plant what a compromised writer or older policy left behind)."""
        seq = self.current_seq + 1
        stored = Stored(seq, wire_id, envelope)
        self.messages.append(stored)
        self.by_id[wire_id] = stored
        return seq

    def retain_through(self, seq: int) -> None:
        self.floor = max(self.floor, seq)
        self.messages = [m for m in self.messages if m.seq > self.floor]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    # -- documents ----------------------------------------------------------------

    def binding(self) -> ResponseBinding:
        return ResponseBinding(self.server_instance_id, self.team_id, self.team_name, self.floor)

    def capabilities(self) -> Capabilities:
        return Capabilities(
            self.binding(), self.current_seq, self.max_blob_bytes, tuple(self.history)
        )

    def error(
        self, status: int, code: str, details: dict[str, Any] | None = None
    ) -> httpx.Response:
        bound = status not in (400, 401, 413)
        body = ErrorResponse(
            status,
            code,
            "fake relay refusal",
            details or {},
            self.server_instance_id if bound else None,
            self.team_id if bound else None,
            self.team_name if bound else None,
            self.floor if bound else None,
        )
        return reply(body.to_obj(), status)

    # -- dispatch -----------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append((request.method, str(request.url), dict(request.headers)))
        for index, (method, where, answer) in enumerate(self.injected):
            if method == request.method and where == path:
                del self.injected[index]
                return answer()
        if path == "/v1/health":
            return reply(
                {
                    "status": "ok",
                    "server_instance_id": self.server_instance_id,
                    "protocol": {"supported_versions": [1]},
                    "database": "ok",
                }
            )
        if path == "/v1/pairing/exchange":
            if json.loads(request.content)["token"] != TOKEN:
                return self.error(401, "invalid-pairing-token")
            return reply(
                {
                    "protocol_version": 1,
                    "server_instance_id": self.server_instance_id,
                    "remote_team_id": self.team_id,
                    "remote_team_name": self.team_name,
                    "credential_id": self.credential_id,
                    "credential": SECRET,
                    "capabilities": self.capabilities().to_obj(),
                }
            )
        authorized = request.headers.get("Authorization") == f"Bearer {SECRET}"
        if not authorized or (self.revoked and not path.endswith("/revoke")):
            return self.error(401, "unauthenticated")
        if path.endswith("/revoke"):
            self.revoked = True
            return reply(
                {
                    **self.binding().to_members(),
                    "credential_id": self.credential_id,
                    "revoked": True,
                    "revoked_at": RECEIVED_AT,
                }
            )
        if path == "/v1/capabilities":
            headers = {"Syncengine-Live": "wait-v1"} if self.live else None
            return reply(self.capabilities().to_obj(), headers=headers)
        if path == "/x-syncengine/live/v1/wait" and self.live:
            return self.live_wait(request)
        if path == "/v1/members":
            members = tuple(Member(mid, name) for mid, name in sorted(self.roster))
            return reply(MembersDocument(self.binding(), len(self.roster), members).to_obj())
        if path == "/v1/read-state/sync" and request.method == "POST":
            return self.read_state(request)
        if path == "/v1/messages" and request.method == "POST":
            return self.post(request)
        if path == "/v1/messages":
            return self.get(request)
        return self.error(404, "team-not-found")

    def live_wait(self, request: httpx.Request) -> httpx.Response:
        from wire.http_v1.live import LiveWaitAnswer, LiveWaitQuery

        query = LiveWaitQuery.from_params(dict(request.url.params))
        head = self.current_seq + self.live_lie
        woken = head > query.after or self.read_revision > query.read_after
        answer = LiveWaitAnswer(self.binding(), head, self.read_revision, woken)
        return reply(answer.to_obj())

    def post(self, request: httpx.Request) -> httpx.Response:
        if len(request.content) > self.max_request_bytes:
            return self.error(413, "request-too-large")
        batch = MessageBatch.from_obj(json.loads(request.content))
        allowed = self.history[-1].write_allowed_ciphers
        for item in batch.messages:
            known = self.by_id.get(item.id)
            if known is not None and known.envelope != item.envelope:
                return self.error(409, "message-uuid-conflict", {"id": item.id})
            if known is None and item.envelope.cipher not in allowed:
                return self.error(
                    403,
                    "cipher-policy-violation",
                    {
                        "id": item.id,
                        "v": item.envelope.v,
                        "cipher": item.envelope.cipher,
                        "write_allowed_ciphers": list(allowed),
                        "policy_revision": str(self.history[-1].policy_revision),
                    },
                )
        acks = []
        for item in batch.messages:
            known = self.by_id.get(item.id)
            if known is None:
                seq = self.add_foreign(item.envelope, item.id)
                acks.append(PushAck(item.id, seq, Disposition.STORED))
            else:
                acks.append(PushAck(item.id, known.seq, Disposition.DUPLICATE))
        self.posted_batches.append(len(batch.messages))
        response = PushResponse(self.binding(), self.history[-1].policy_revision, tuple(acks))
        return reply(response.to_obj())

    def read_state(self, request: httpx.Request) -> httpx.Response:
        """Merge (max / union), garbage-collect exact reads a frontier covers,
        then serve one keyset page of every active member's items."""
        body = ReadStateRequest.from_obj(json.loads(request.content))
        self.read_requests.append(body)
        active = {member_id for member_id, _ in self.roster}
        for update in body.updates:
            if update.member_id not in active or update.server_seq > self.current_seq:
                return self.error(400, "invalid-request")
        for update in body.updates:
            mid = update.member_id
            self.read_frontiers[mid] = max(self.read_frontiers.get(mid, 0), update.server_seq)
            self.read_exact.setdefault(mid, set()).update(update.exact_wire_ids)
        items: list[FrontierItem | ExactItem] = []
        for mid in sorted(active):
            frontier = max(self.read_frontiers.get(mid, 0), self.floor)
            items.append(FrontierItem(mid, frontier))
            for wire_id in sorted(self.read_exact.get(mid, set())):
                stored = self.by_id.get(wire_id)
                if stored is None or stored.seq > frontier:
                    items.append(ExactItem(mid, wire_id))
        if body.page_after is not None:
            boundary = body.page_after.sort_key
            items = [item for item in items if item.key.sort_key > boundary]
        page, rest = items[: body.page_limit], items[body.page_limit :]
        document = ReadStatePage(
            self.binding(),
            self.current_seq,
            tuple(page),
            page[-1].key if rest else None,
            bool(rest),
        )
        return reply(document.to_obj())

    def get(self, request: httpx.Request) -> httpx.Response:
        after = int(request.url.params["after"])
        limit = int(request.url.params.get("limit", "100"))
        if after < self.floor:
            return self.error(
                410,
                "resync-required",
                {"after": str(after), "min_available_seq": str(self.floor)},
            )
        visible = [m for m in self.messages if m.seq > after]
        page = visible[:limit]
        document = MessagePage(
            self.binding(),
            tuple(PulledMessage(m.seq, m.id, RECEIVED_AT, m.envelope) for m in page),
            page[-1].seq if page else after,
            len(visible) > limit,
        )
        return reply(document.to_obj())
