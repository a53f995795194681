"""Backend-neutral storage rules: decided in Python, identical for every database.

Both stores call these (through relay/storage/operations.py and
relay/storage/steps.py) so that SQLite and PostgreSQL cannot drift apart on a
rule that needs no data: the within-document provisioning checks, which
member a read-state overflow is blamed on, and the retention log line. The
limits are parameters, not imports: relay/storage/steps.py passes its own
module constants (tests lower them there).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from relay.errors import ProvisioningRejected, ReadStateLimitExceeded
from relay.limits import MAX_MEMBERS
from relay.storage.records import ProvisioningDocument, RetentionResult

__all__ = ["check_document_shape", "check_read_state_bounds", "log_retention"]

_retention_log = logging.getLogger("relay.retention")


def check_document_shape(document: ProvisioningDocument) -> None:
    """Within-document uniqueness rules; cross-revision rules need the database."""
    if len(document.members) > MAX_MEMBERS:
        raise ProvisioningRejected(
            f"{len(document.members)} members exceed the limit of {MAX_MEMBERS}",
            "split the team; a roster holds at most 1,000 active members",
        )
    member_ids: set[str] = set()
    names: set[str] = set()
    reg_ids: set[str] = set()
    for member in document.members:
        if member.member_id in member_ids:
            raise ProvisioningRejected(f"duplicate member_id {member.member_id}")
        if member.name in names:
            raise ProvisioningRejected(f"duplicate member name {member.name!r}")
        member_ids.add(member.member_id)
        names.add(member.name)
        for reg in member.registrations:
            if reg.registration_id in reg_ids:
                raise ProvisioningRejected(f"duplicate registration_id {reg.registration_id}")
            reg_ids.add(reg.registration_id)


def check_read_state_bounds(
    added: Mapping[str, int],
    counts: Mapping[str, int],
    total: int,
    *,
    max_per_member: int,
    max_per_team: int,
) -> None:
    """Raise 409 naming the member whose *new* exact reads broke a bound.

    Only a member whose new facts survived GC can have caused an overflow;
    naming one guarantees that dropping its update from a retry makes
    progress (read-state spec "Limit failure and recovery").
    """
    contributors = sorted(m for m, n in added.items() if n > 0)
    causal = next((m for m in contributors if counts.get(m, 0) > max_per_member), None)
    if causal is None and total > max_per_team and contributors:
        causal = contributors[0]
    if causal is not None:
        raise ReadStateLimitExceeded(
            details={
                "member_id": causal,
                "member_exact_count": str(counts.get(causal, 0)),
                "team_exact_count": str(total),
                "max_exact_per_member": max_per_member,
                "max_exact_per_team": max_per_team,
            },
        )


def log_retention(result: RetentionResult, *, automatic: bool) -> None:
    """Operator-visible retention record: team, floors, row count — nothing else."""
    if result.new_floor == result.old_floor:
        return
    _retention_log.info(
        json.dumps(
            {
                "event": "retention",
                "mode": "automatic" if automatic else "manual",
                "team_id": result.team_id,
                "old_floor": str(result.old_floor),
                "new_floor": str(result.new_floor),
                "rows_removed": result.rows_removed,
            },
            sort_keys=True,
        )
    )
