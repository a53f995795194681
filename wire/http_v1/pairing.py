"""Pairing exchange and self-revocation: the bearer-credential model we keep.

server/spec/v1.md "Pairing and per-device credentials". The newest upstream
copy marks this model superseded; we build to it deliberately
(specs/http-v1.md, "Authentication model").

``POST /v1/pairing/exchange``: the strict body is ``{"token": ...}`` and
nothing else. The ``200`` answer carries ``protocol_version``, the
``server_instance_id``, ``remote_team_id`` / ``remote_team_name`` (named so,
not the common binding members), a UUIDv7 ``credential_id``, the opaque
``credential`` — returned this once, never again — and ``capabilities``: the
full capability document of the same snapshot, whose IDs and team name must
equal the outer ones.

``POST /v1/credentials/<credential_id>/revoke`` has no body; its ``200``
answer is the common binding plus ``credential_id`` (equal to the path's),
``revoked: true`` and the canonical ``revoked_at``.

Secrets never appear in ``repr`` and never in an error rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding, check_protocol_version
from wire.http_v1.capabilities import Capabilities
from wire.http_v1.headers import check_opaque_secret
from wire.limits import PROTOCOL_VERSION
from wire.scalars import check_team_name, check_timestamp, check_uuid7
from wire.schema import expect_bool, expect_object, join_field

__all__ = ["PairingRequest", "PairingResponse", "RevokeResponse"]


@dataclass(frozen=True, slots=True)
class PairingRequest:
    """The one-time, team-scoped exchange code an operator issued."""

    token: str = field(repr=False)

    def validate(self, field: str = "request") -> PairingRequest:
        check_opaque_secret(self.token, join_field(field, "token"))
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {"token": self.token}

    @classmethod
    def from_obj(cls, value: Any, field: str = "request") -> PairingRequest:
        obj = expect_object(value, field, ("token",))
        return cls(obj["token"]).validate(field)


@dataclass(frozen=True, slots=True)
class PairingResponse:
    """A new device credential and the capability snapshot it was minted with."""

    server_instance_id: str
    remote_team_id: str
    remote_team_name: str
    credential_id: str
    credential: str = field(repr=False)
    capabilities: Capabilities = field(repr=False, kw_only=True)

    def validate(self, field: str = "pairing") -> PairingResponse:
        check_uuid7(self.server_instance_id, join_field(field, "server_instance_id"))
        check_uuid7(self.remote_team_id, join_field(field, "remote_team_id"))
        check_team_name(self.remote_team_name, join_field(field, "remote_team_name"))
        check_uuid7(self.credential_id, join_field(field, "credential_id"))
        check_opaque_secret(self.credential, join_field(field, "credential"))
        if not isinstance(self.capabilities, Capabilities):
            raise SchemaError(join_field(field, "capabilities"), "must be a capability document")
        self.capabilities.validate(join_field(field, "capabilities"))
        nested = self.capabilities.binding
        if nested.server_instance_id != self.server_instance_id:
            raise SchemaError(
                join_field(field, "capabilities.server_instance_id"),
                "must equal the outer server_instance_id",
            )
        if nested.team_id != self.remote_team_id:
            raise SchemaError(
                join_field(field, "capabilities.team_id"), "must equal the outer remote_team_id"
            )
        if nested.team_name != self.remote_team_name:
            raise SchemaError(
                join_field(field, "capabilities.team_name"),
                "must equal the outer remote_team_name",
            )
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            "protocol_version": PROTOCOL_VERSION,
            "server_instance_id": self.server_instance_id,
            "remote_team_id": self.remote_team_id,
            "remote_team_name": self.remote_team_name,
            "credential_id": self.credential_id,
            "credential": self.credential,
            "capabilities": self.capabilities.to_obj(),
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "pairing") -> PairingResponse:
        members = (
            "protocol_version",
            "server_instance_id",
            "remote_team_id",
            "remote_team_name",
            "credential_id",
            "credential",
            "capabilities",
        )
        obj = expect_object(value, field, members, closed=False)
        check_protocol_version(obj["protocol_version"], join_field(field, "protocol_version"))
        capabilities = Capabilities.from_obj(obj["capabilities"], join_field(field, "capabilities"))
        return cls(
            obj["server_instance_id"],
            obj["remote_team_id"],
            obj["remote_team_name"],
            obj["credential_id"],
            obj["credential"],
            capabilities=capabilities,
        ).validate(field)


@dataclass(frozen=True, slots=True)
class RevokeResponse:
    """Proof that one device credential is revoked (idempotent on retry)."""

    binding: ResponseBinding
    credential_id: str
    revoked_at: str

    def validate(self, field: str = "revoke") -> RevokeResponse:
        self.binding.validate(field)
        check_uuid7(self.credential_id, join_field(field, "credential_id"))
        check_timestamp(self.revoked_at, join_field(field, "revoked_at"))
        return self

    def check_matches(self, credential_id: str, field: str = "revoke") -> RevokeResponse:
        """The answer is about the credential whose path we posted to."""
        if self.credential_id != credential_id:
            raise SchemaError(
                join_field(field, "credential_id"), "must equal the credential_id in the path"
            )
        return self

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            **self.binding.to_members(),
            "credential_id": self.credential_id,
            "revoked": True,
            "revoked_at": self.revoked_at,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "revoke") -> RevokeResponse:
        members = (*BINDING_MEMBERS, "credential_id", "revoked", "revoked_at")
        obj = expect_object(value, field, members, closed=False)
        binding = ResponseBinding.from_members(obj, field)
        if expect_bool(obj["revoked"], join_field(field, "revoked")) is not True:
            raise SchemaError(join_field(field, "revoked"), "a revoke answer says revoked: true")
        return cls(binding, obj["credential_id"], obj["revoked_at"]).validate(field)
