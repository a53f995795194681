"""``GET /v1/health``: readiness and version discovery, never a binding source
when unavailable.

server/spec/v1.md "GET /v1/health": ``200`` with ``status: "ok"``,
``database: "ok"``, the ``server_instance_id`` and
``protocol.supported_versions``; ``503`` with ``status: "unavailable"``,
``database: "unavailable"``, the same advertisement, and the instance ID only
if it could be read. Health has no common binding members (it is not
team-scoped) and no ``protocol_version`` body member.

Decision (specs/http-v1.md; shared/UPSTREAM-RECORDS.md §9 item 3): the
upstream engine wants health to echo ``team_id`` while the reference server
omits it, so ``team_id`` is *optional* here — validated as a UUIDv7 when
present, never required. It only makes sense next to a ``server_instance_id``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from wire.errors import SchemaError
from wire.scalars import check_uuid7
from wire.schema import expect_int, expect_list, expect_object, expect_str, join_field

__all__ = ["Health", "HealthStatus"]

_MAX_VERSIONS = 64
_VERSION_MAX = 2**31 - 1


class HealthStatus(enum.StrEnum):
    """Readiness: the process answers and its database probe succeeded, or not."""

    OK = "ok"
    UNAVAILABLE = "unavailable"

    @property
    def http_status(self) -> int:
        return 200 if self is HealthStatus.OK else 503


@dataclass(frozen=True, slots=True)
class Health:
    """One health document; ``database`` always mirrors ``status``."""

    status: HealthStatus
    supported_versions: tuple[int, ...]
    server_instance_id: str | None = None
    team_id: str | None = None

    def validate(self, field: str = "health") -> Health:
        HealthStatus(self.status)
        versions = join_field(field, "protocol.supported_versions")
        if not self.supported_versions:
            raise SchemaError(versions, "must advertise at least one version")
        for index, version in enumerate(self.supported_versions):
            expect_int(version, join_field(versions, index), minimum=1, maximum=_VERSION_MAX)
        if len(set(self.supported_versions)) != len(self.supported_versions):
            raise SchemaError(versions, "versions must be distinct")
        if self.server_instance_id is None:
            if self.status is HealthStatus.OK:
                raise SchemaError(
                    join_field(field, "server_instance_id"), "a ready server must name its instance"
                )
        else:
            check_uuid7(self.server_instance_id, join_field(field, "server_instance_id"))
        if self.team_id is not None:
            check_uuid7(self.team_id, join_field(field, "team_id"))
            if self.server_instance_id is None:
                raise SchemaError(
                    join_field(field, "team_id"), "a team_id needs its server_instance_id"
                )
        return self

    @property
    def http_status(self) -> int:
        return self.status.http_status

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        obj: dict[str, Any] = {
            "status": self.status.value,
            "protocol": {"supported_versions": list(self.supported_versions)},
            "database": self.status.value,
        }
        if self.server_instance_id is not None:
            obj["server_instance_id"] = self.server_instance_id
        if self.team_id is not None:
            obj["team_id"] = self.team_id
        return obj

    @classmethod
    def from_obj(cls, value: Any, field: str = "health", http_status: int | None = None) -> Health:
        """Parse a health body; with ``http_status`` also check 200⇔ok, 503⇔unavailable."""
        obj = expect_object(
            value,
            field,
            ("status", "protocol", "database"),
            ("server_instance_id", "team_id"),
            closed=False,
        )
        status_field = join_field(field, "status")
        status_text = expect_str(obj["status"], status_field)
        try:
            status = HealthStatus(status_text)
        except ValueError:
            raise SchemaError(status_field, "must be 'ok' or 'unavailable'") from None
        database = expect_str(obj["database"], join_field(field, "database"))
        if database != status.value:
            raise SchemaError(join_field(field, "database"), f"must be {status.value!r} here")
        protocol_field = join_field(field, "protocol")
        protocol = expect_object(
            obj["protocol"], protocol_field, ("supported_versions",), closed=False
        )
        versions = expect_list(
            protocol["supported_versions"],
            join_field(protocol_field, "supported_versions"),
            min_items=1,
            max_items=_MAX_VERSIONS,
        )
        for optional in ("server_instance_id", "team_id"):
            # Present means a UUIDv7: an explicit null is not an omission.
            if optional in obj:
                check_uuid7(obj[optional], join_field(field, optional))
        health = cls(
            status=status,
            supported_versions=tuple(versions),
            server_instance_id=obj.get("server_instance_id"),
            team_id=obj.get("team_id"),
        ).validate(field)
        if http_status is not None and http_status != status.http_status:
            raise SchemaError(
                status_field, f"status {status.value!r} needs HTTP {status.http_status}"
            )
        return health
