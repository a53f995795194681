"""Storage records → v1 response documents (canonical decimals and timestamps).

Sequences and revisions leave the relay only as canonical decimal strings
(v1.md "Scope and conventions"); the capability document is built through
:class:`wire.http_v1.capabilities.Capabilities`, whose invariants (history
ascending, last entry equals current, boundary = current + 1) are checked on
every render, so the relay cannot emit a document a client would refuse.
"""

from __future__ import annotations

from typing import Any

from relay.errors import RelayError
from relay.limits import PROTOCOL_VERSION
from relay.storage.records import (
    CapabilitySnapshot,
    ExchangeResult,
    LiveHead,
    MessagePage,
    PostResult,
    ReadKey,
    ReadStatePage,
    RevokeResult,
    Roster,
    TeamBinding,
)
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.capabilities import Capabilities
from wire.http_v1.errors import ErrorResponse
from wire.http_v1.live import LiveWaitAnswer
from wire.scalars import format_seq


def binding_members(server_instance_id: str, binding: TeamBinding) -> dict[str, Any]:
    return ResponseBinding(
        server_instance_id, binding.team_id, binding.team_name, binding.min_available_seq
    ).to_members()


def capabilities(server_instance_id: str, snapshot: CapabilitySnapshot) -> dict[str, Any]:
    binding = ResponseBinding(
        server_instance_id,
        snapshot.binding.team_id,
        snapshot.binding.team_name,
        snapshot.binding.min_available_seq,
    )
    return Capabilities(
        binding, snapshot.current_seq, snapshot.max_blob_bytes, snapshot.policy_history
    ).to_obj()


def post_result(server_instance_id: str, result: PostResult) -> dict[str, Any]:
    return {
        **binding_members(server_instance_id, result.binding),
        "policy_revision": format_seq(result.policy_revision),
        "acks": [
            {"id": ack.wire_id, "server_seq": str(ack.server_seq), "disposition": ack.disposition}
            for ack in result.acks
        ],
    }


def live_answer(server_instance_id: str, head: LiveHead, woken: bool) -> dict[str, Any]:
    """The live wait's answer, checked by :class:`wire.http_v1.live.LiveWaitAnswer`."""
    binding = ResponseBinding(
        server_instance_id,
        head.binding.team_id,
        head.binding.team_name,
        head.binding.min_available_seq,
    )
    return LiveWaitAnswer(binding, head.current_seq, head.read_revision, woken).to_obj()


def message_page(server_instance_id: str, page: MessagePage) -> dict[str, Any]:
    return {
        **binding_members(server_instance_id, page.binding),
        "messages": [
            {
                "server_seq": str(m.server_seq),
                "id": m.wire_id,
                "server_received_at": m.server_received_at,
                "envelope": {"v": m.v, "cipher": m.cipher, "key_id": m.key_id, "blob": m.blob},
            }
            for m in page.messages
        ],
        "next_after": format_seq(page.next_after),
        "has_more": page.has_more,
    }


def roster(server_instance_id: str, value: Roster) -> dict[str, Any]:
    return {
        **binding_members(server_instance_id, value.binding),
        "members_revision": format_seq(value.members_revision),
        "members": [
            {
                "member_id": m.member_id,
                "name": m.name,
                "registrations": [
                    {
                        "registration_id": r.registration_id,
                        "installation_id": r.installation_id,
                        "type": r.type,
                    }
                    for r in m.registrations
                ],
            }
            for m in value.members
        ],
    }


def read_key(key: ReadKey) -> dict[str, Any]:
    if key.kind_order == 0:
        return {"member_id": key.member_id, "kind": "frontier"}
    return {"member_id": key.member_id, "kind": "exact", "wire_id": key.wire_id}


def read_state_page(server_instance_id: str, page: ReadStatePage) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for item in page.items:
        if item.key.kind_order == 0:
            assert item.server_seq is not None
            items.append(
                {
                    "kind": "frontier",
                    "member_id": item.key.member_id,
                    "server_seq": format_seq(item.server_seq),
                }
            )
        else:
            items.append(
                {"kind": "exact", "member_id": item.key.member_id, "wire_id": item.key.wire_id}
            )
    after = page.next_page_after
    return {
        **binding_members(server_instance_id, page.binding),
        "current_seq": format_seq(page.current_seq),
        "items": items,
        "next_page_after": None if after is None else read_key(after),
        "has_more": page.has_more,
    }


def exchange_result(server_instance_id: str, result: ExchangeResult, secret: str) -> dict[str, Any]:
    binding = result.capabilities.binding
    return {
        "protocol_version": PROTOCOL_VERSION,
        "server_instance_id": server_instance_id,
        "remote_team_id": binding.team_id,
        "remote_team_name": binding.team_name,
        "credential_id": result.credential_id,
        "credential": secret,
        "capabilities": capabilities(server_instance_id, result.capabilities),
    }


def revoke_result(server_instance_id: str, result: RevokeResult) -> dict[str, Any]:
    return {
        **binding_members(server_instance_id, result.binding),
        "credential_id": result.credential_id,
        "revoked": True,
        "revoked_at": result.revoked_at,
    }


def error(exc: RelayError, server_instance_id: str | None) -> dict[str, Any]:
    """The single error envelope, built (and checked) by :mod:`wire.http_v1.errors`.

    Binding members appear exactly as far as resolution got; the wire
    builder refuses a body whose binding or ``details`` a client would reject,
    so a relay bug surfaces as a 500 in tests rather than as a confused client.
    """
    bound = exc.server_bound and server_instance_id is not None
    floor = exc.extra.get("min_available_seq")
    return ErrorResponse(
        status=exc.status,
        code=exc.code,
        message=exc.message,
        details=exc.details,
        server_instance_id=server_instance_id if bound else None,
        team_id=exc.team_id if bound else None,
        team_name=exc.extra.get("team_name") if bound else None,
        min_available_seq=int(floor) if bound and floor is not None else None,
    ).to_obj()
