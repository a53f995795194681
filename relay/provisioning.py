"""The operator provisioning document → :class:`ProvisioningDocument`.

v1.md "GET /v1/members": the document holds ``team_id``, ``team_name`` and
the complete ``members`` array in the response schema (``registrations`` may
be omitted for a member with none), and MUST NOT contain
``members_revision``. Names are NFC-normalized first, then checked.
Cross-revision rules (retired IDs and names never reused) need the database
and are enforced by the store inside the replace transaction.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from relay.errors import ProvisioningRejected
from relay.limits import MAX_MEMBERS
from relay.storage.records import Member, ProvisioningDocument, Registration
from wire import jcs
from wire.errors import WireError
from wire.scalars import check_team_name, check_uuid7, normalize_agent_name
from wire.schema import expect_list, expect_object, expect_str, join_field


def parse_provisioning_document(data: bytes) -> ProvisioningDocument:
    try:
        return _parse(jcs.loads(data))
    except WireError as exc:
        raise ProvisioningRejected(
            f"provisioning document: {exc}",
            "fix the named field; the document was not applied",
        ) from None


def _parse(value: Any) -> ProvisioningDocument:
    obj = expect_object(value, "", ["team_id", "team_name", "members"])
    team_id = check_uuid7(obj["team_id"], "team_id")
    team_name = check_team_name(
        unicodedata.normalize("NFC", expect_str(obj["team_name"], "team_name")), "team_name"
    )
    raw_members = expect_list(obj["members"], "members", max_items=MAX_MEMBERS)
    members = []
    for index, item in enumerate(raw_members):
        where = join_field("members", index)
        member = expect_object(item, where, ["member_id", "name"], ["registrations"])
        registrations = []
        for r_index, reg in enumerate(
            expect_list(member.get("registrations", []), join_field(where, "registrations"))
        ):
            r_where = join_field(join_field(where, "registrations"), r_index)
            fields = expect_object(reg, r_where, ["registration_id", "installation_id", "type"])
            reg_type = expect_str(fields["type"], join_field(r_where, "type"))
            if not reg_type or len(reg_type) > 128 or not reg_type.isprintable():
                raise ProvisioningRejected(f"{r_where}.type must be 1-128 printable characters")
            registrations.append(
                Registration(
                    check_uuid7(fields["registration_id"], join_field(r_where, "registration_id")),
                    check_uuid7(fields["installation_id"], join_field(r_where, "installation_id")),
                    reg_type,
                )
            )
        members.append(
            Member(
                check_uuid7(member["member_id"], join_field(where, "member_id")),
                normalize_agent_name(
                    expect_str(member["name"], join_field(where, "name")), join_field(where, "name")
                ),
                tuple(sorted(registrations, key=lambda r: r.registration_id)),
            )
        )
    return ProvisioningDocument(team_id, team_name, tuple(members))
