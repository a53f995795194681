"""Valid example documents in the shapes server/spec/v1.md shows, with our own values.

Each function returns a fresh JSON object so a test can break exactly one
rule of it and expect exactly that rule to be reported.
"""

from __future__ import annotations

import base64
from typing import Any

from wire import jcs

SERVER = "0190a1b2-c3d4-7e5f-8a6b-000000000001"
TEAM = "0190a1b2-c3d4-7e5f-8a6b-000000000002"
OTHER_TEAM = "0190a1b2-c3d4-7e5f-8a6b-0000000000ff"
MEMBER_A = "0190a1b2-c3d4-7e5f-8a6b-000000000010"
MEMBER_B = "0190a1b2-c3d4-7e5f-8a6b-000000000020"
REGISTRATION_A = "0190a1b2-c3d4-7e5f-8a6b-000000000011"
REGISTRATION_B = "0190a1b2-c3d4-7e5f-8a6b-000000000012"
INSTALLATION = "0190a1b2-c3d4-7e5f-8a6b-000000000013"
CREDENTIAL_ID = "0190a1b2-c3d4-7e5f-8a6b-000000000030"
WIRE_1 = "6f1c2d3e-4a5b-4c6d-8e7f-000000000001"
WIRE_2 = "6f1c2d3e-4a5b-4c6d-8e7f-000000000002"
WIRE_3 = "6f1c2d3e-4a5b-4c6d-8e7f-000000000003"
TIME = "2026-03-04T05:06:07.123456Z"


def blob(text: str = "hello") -> str:
    plaintext = {
        "body": text,
        "created_at": "2026-03-04T05:06:00.000000Z",
        "from_agent": "planner",
        "to_agent": "builder",
    }
    return base64.b64encode(jcs.canonicalize(plaintext)).decode("ascii")


def envelope(text: str = "hello") -> dict[str, Any]:
    return {"v": 1, "cipher": "none", "key_id": None, "blob": blob(text)}


def binding(floor: str = "0") -> dict[str, Any]:
    return {
        "protocol_version": 1,
        "server_instance_id": SERVER,
        "team_id": TEAM,
        "team_name": "night-shift",
        "min_available_seq": floor,
    }


def policy(
    revision: str = "0", boundary: str = "1", ciphers: list[str] | None = None
) -> dict[str, Any]:
    return {
        "policy_revision": revision,
        "effective_from_seq": boundary,
        "accepted_envelope_versions": [1],
        "write_allowed_ciphers": ["none"] if ciphers is None else ciphers,
    }


def capabilities(current: str = "7") -> dict[str, Any]:
    history = [policy("0", "1"), policy("3", "5", ["none", "age-v1"])]
    return {
        **binding(),
        "current_seq": current,
        "next_sequence_boundary": str(int(current) + 1),
        **history[-1],
        "max_blob_bytes": "1048576",
        "policy_history": history,
    }


def health() -> dict[str, Any]:
    return {
        "status": "ok",
        "server_instance_id": SERVER,
        "protocol": {"supported_versions": [1]},
        "database": "ok",
    }


def batch(*ids: str) -> dict[str, Any]:
    chosen = ids or (WIRE_1, WIRE_2)
    return {"messages": [{"id": wire_id, "envelope": envelope(wire_id)} for wire_id in chosen]}


def ack(wire_id: str, seq: str, disposition: str = "stored") -> dict[str, Any]:
    return {"id": wire_id, "server_seq": seq, "disposition": disposition}


def push_response(*acks: dict[str, Any]) -> dict[str, Any]:
    chosen = list(acks) or [ack(WIRE_1, "41"), ack(WIRE_2, "42")]
    return {**binding(), "policy_revision": "0", "acks": chosen}


def pulled(seq: str, wire_id: str) -> dict[str, Any]:
    return {"server_seq": seq, "id": wire_id, "server_received_at": TIME, "envelope": envelope()}


def page(
    *messages: dict[str, Any], has_more: bool = False, next_after: str | None = None
) -> dict[str, Any]:
    chosen = list(messages) if messages else [pulled("41", WIRE_1), pulled("42", WIRE_2)]
    last = chosen[-1]["server_seq"] if chosen else "40"
    return {
        **binding(),
        "messages": chosen,
        "next_after": last if next_after is None else next_after,
        "has_more": has_more,
    }


def members() -> dict[str, Any]:
    return {
        **binding(),
        "members_revision": "7",
        "members": [
            {
                "member_id": MEMBER_A,
                "name": "planner",
                "registrations": [
                    {
                        "registration_id": REGISTRATION_A,
                        "installation_id": INSTALLATION,
                        "type": "codex",
                    },
                    {
                        "registration_id": REGISTRATION_B,
                        "installation_id": INSTALLATION,
                        "type": "claude",
                    },
                ],
            },
            {"member_id": MEMBER_B, "name": "builder", "registrations": []},
        ],
    }


def read_request() -> dict[str, Any]:
    return {
        "updates": [{"member_id": MEMBER_A, "server_seq": "42", "exact_wire_ids": [WIRE_1]}],
        "page_after": None,
        "page_limit": 1000,
    }


def frontier(member: str, seq: str) -> dict[str, Any]:
    return {"kind": "frontier", "member_id": member, "server_seq": seq}


def exact(member: str, wire_id: str) -> dict[str, Any]:
    return {"kind": "exact", "member_id": member, "wire_id": wire_id}


def read_page(*items: dict[str, Any], has_more: bool = False) -> dict[str, Any]:
    chosen = (
        list(items)
        if items
        else [frontier(MEMBER_A, "42"), exact(MEMBER_A, WIRE_1), frontier(MEMBER_B, "0")]
    )
    cursor = None
    if has_more:
        last = chosen[-1]
        cursor = {"member_id": last["member_id"], "kind": last["kind"]}
        if last["kind"] == "exact":
            cursor["wire_id"] = last["wire_id"]
    return {
        **binding(),
        "current_seq": "52",
        "items": chosen,
        "next_page_after": cursor,
        "has_more": has_more,
    }


def pairing() -> dict[str, Any]:
    return {
        "protocol_version": 1,
        "server_instance_id": SERVER,
        "remote_team_id": TEAM,
        "remote_team_name": "night-shift",
        "credential_id": CREDENTIAL_ID,
        "credential": "agmsg_cred_Zm9vYmFy",
        "capabilities": capabilities(),
    }


def revoke() -> dict[str, Any]:
    return {**binding(), "credential_id": CREDENTIAL_ID, "revoked": True, "revoked_at": TIME}


def error(
    code: str, details: dict[str, Any] | None = None, *, bound: bool = True
) -> dict[str, Any]:
    obj: dict[str, Any] = {"protocol_version": 1}
    if bound:
        obj["server_instance_id"] = SERVER
        obj["team_id"] = TEAM
    obj["error"] = {"code": code, "message": "something happened", "details": details or {}}
    return obj
