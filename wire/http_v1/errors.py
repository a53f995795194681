"""The HTTP v1 error envelope, the code table, and the typed error it becomes.

server/spec/v1.md "Common response fields" and "Error and retry semantics".
Every application error body is ``{protocol_version, error: {code, message,
details}}`` plus, depending on how far the server got, binding members:
errors raised before the database or team is resolved omit the IDs, later
ones carry ``server_instance_id`` and then ``team_id``. Clients branch on
``code`` only and apply the binding stop rule to errors as to successes.

:data:`ERROR_CODES` is the table: code → allowed HTTP statuses, whether the
team binding is required, forbidden or optional, whether a retry of the
unchanged request can help, and what the client should do. Where the spec
names the binding (403, 404, 409, 410, 429, 507 and the cipher errors) it is
required; ``401`` and ``426`` precede resolution, so they never carry it. For
``400``, ``413`` and ``5xx`` the server may or may not have resolved the team,
so the binding is optional (specs/http-v1.md, "Error binding").

Codes with a fixed ``details`` schema (resync, conflicts, cipher policy,
protocol negotiation, pairing expiry, read-state limits) are checked here;
other codes accept any ``details`` object. Unknown members are ignored, as
for every response. A code absent from the table is kept (the client must
still classify it) when it is well formed; its status decides the retry.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from wire.errors import ProtocolError, SchemaError
from wire.http_v1.binding import check_protocol_version
from wire.limits import PROTOCOL_VERSION
from wire.scalars import (
    check_cipher,
    check_team_name,
    check_timestamp,
    check_uuid4,
    check_uuid7,
    format_seq,
    parse_seq,
)
from wire.schema import expect_int, expect_list, expect_object, expect_str, join_field

__all__ = [
    "ERROR_CODES",
    "BindingRule",
    "ClientAction",
    "ErrorCode",
    "ErrorResponse",
    "RelayError",
    "intermediary_failure",
    "is_retryable_status",
]

_CODE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_MAX_MESSAGE_CHARS = 4096
_RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


class BindingRule(enum.Enum):
    """Whether an error body carries ``server_instance_id`` and ``team_id``."""

    FORBIDDEN = "forbidden"
    OPTIONAL = "optional"
    REQUIRED = "required"


class ClientAction(enum.StrEnum):
    """What the client does next (the table's "Client action" column)."""

    FIX_REQUEST = "fix-request"
    REFRESH_CREDENTIALS = "refresh-credentials"
    NEW_PAIRING_TOKEN = "new-pairing-token"
    STOP = "stop"
    REFRESH_CAPABILITIES = "refresh-capabilities"
    SURFACE_CONFLICT = "surface-conflict"
    BLOCK_MEMBER = "block-member"
    RESYNC_REQUIRED = "resync-required"
    SPLIT_BATCH = "split-batch"
    RETRY = "retry"
    STOP_WRITES = "stop-writes"


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One row of the error table."""

    code: str
    statuses: frozenset[int]
    binding: BindingRule
    retryable: bool
    action: ClientAction


def _row(
    code: str, statuses: set[int], binding: BindingRule, action: ClientAction
) -> tuple[str, ErrorCode]:
    retryable = action is ClientAction.RETRY
    return code, ErrorCode(code, frozenset(statuses), binding, retryable, action)


_F, _O, _R = BindingRule.FORBIDDEN, BindingRule.OPTIONAL, BindingRule.REQUIRED
_A = ClientAction

#: v1.md "Error and retry semantics", with the binding rule of each code.
ERROR_CODES: Mapping[str, ErrorCode] = MappingProxyType(
    dict(
        [
            _row("invalid-request", {400}, _O, _A.FIX_REQUEST),
            _row("unauthenticated", {401}, _F, _A.REFRESH_CREDENTIALS),
            _row("invalid-pairing-token", {401}, _F, _A.NEW_PAIRING_TOKEN),
            _row("forbidden", {403}, _R, _A.STOP),
            _row("credential-scope-violation", {403}, _R, _A.STOP),
            _row("cipher-policy-violation", {403}, _R, _A.REFRESH_CAPABILITIES),
            _row("team-not-found", {404}, _R, _A.STOP),
            _row("message-uuid-conflict", {409}, _R, _A.SURFACE_CONFLICT),
            _row("pairing-token-consumed", {409}, _R, _A.NEW_PAIRING_TOKEN),
            _row("read-state-limit-exceeded", {409}, _R, _A.BLOCK_MEMBER),
            _row("resync-required", {410}, _R, _A.RESYNC_REQUIRED),
            _row("pairing-token-expired", {410}, _R, _A.NEW_PAIRING_TOKEN),
            _row("request-too-large", {413}, _O, _A.SPLIT_BATCH),
            _row("unsupported-cipher", {422}, _R, _A.STOP),
            _row("unsupported-protocol-version", {426}, _F, _A.STOP),
            _row("rate-limited", {429}, _R, _A.RETRY),
            _row("internal-error", {500}, _O, _A.RETRY),
            _row("unavailable", {502, 503, 504}, _O, _A.RETRY),
            _row("sequence-exhausted", {507}, _R, _A.STOP_WRITES),
        ]
    )
)


def is_retryable_status(status: int) -> bool:
    """Unknown outcome: retry the exact request (429, 500, 502, 503, 504)."""
    return status in _RETRYABLE_STATUSES


# --- details schemas --------------------------------------------------------


def _seq(details: dict[str, Any], name: str, field: str) -> int:
    return parse_seq(details[name], join_field(field, name))


def _check_cipher_details(details: dict[str, Any], field: str, *, unsupported: bool) -> None:
    names = ["write_allowed_ciphers", "policy_revision", "id", "v", "cipher"]
    if unsupported:
        names.append("accepted_envelope_versions")
    expect_object(details, field, names, closed=False)
    at = join_field(field, "write_allowed_ciphers")
    for index, cipher in enumerate(expect_list(details["write_allowed_ciphers"], at)):
        check_cipher(cipher, join_field(at, index))
    _seq(details, "policy_revision", field)
    check_uuid4(details["id"], join_field(field, "id"))
    expect_int(details["v"], join_field(field, "v"), minimum=0)
    # An unsupported cipher may be one we cannot name well; it is still a string.
    expect_str(details["cipher"], join_field(field, "cipher"))
    if unsupported:
        at = join_field(field, "accepted_envelope_versions")
        for index, version in enumerate(expect_list(details["accepted_envelope_versions"], at)):
            expect_int(version, join_field(at, index), minimum=1)


def _resync_details(details: dict[str, Any], field: str) -> None:
    expect_object(details, field, ("after", "min_available_seq"), closed=False)
    after = _seq(details, "after", field)
    if after >= _seq(details, "min_available_seq", field):
        raise SchemaError(join_field(field, "after"), "a resync cursor lies below the floor")


def _conflict_details(details: dict[str, Any], field: str) -> None:
    expect_object(details, field, ("id",), closed=False)
    check_uuid4(details["id"], join_field(field, "id"))


def _policy_details(details: dict[str, Any], field: str) -> None:
    _check_cipher_details(details, field, unsupported=False)


def _unsupported_details(details: dict[str, Any], field: str) -> None:
    _check_cipher_details(details, field, unsupported=True)


def _version_details(details: dict[str, Any], field: str) -> None:
    expect_object(details, field, ("requested_version", "supported_versions"), closed=False)
    requested = details["requested_version"]
    # null: the header was absent or not a number, so no version was requested.
    if requested is not None:
        expect_int(requested, join_field(field, "requested_version"), minimum=0)
    at = join_field(field, "supported_versions")
    for index, version in enumerate(expect_list(details["supported_versions"], at, min_items=1)):
        expect_int(version, join_field(at, index), minimum=1)


def _expired_details(details: dict[str, Any], field: str) -> None:
    expect_object(details, field, ("expired_at",), closed=False)
    check_timestamp(details["expired_at"], join_field(field, "expired_at"))


def _limit_details(details: dict[str, Any], field: str) -> None:
    names = (
        "member_id",
        "member_exact_count",
        "team_exact_count",
        "max_exact_per_member",
        "max_exact_per_team",
    )
    expect_object(details, field, names, closed=False)
    # The spec requires the offending member: the client blocks exactly it.
    check_uuid7(details["member_id"], join_field(field, "member_id"))
    _seq(details, "member_exact_count", field)
    _seq(details, "team_exact_count", field)
    expect_int(
        details["max_exact_per_member"], join_field(field, "max_exact_per_member"), minimum=1
    )
    expect_int(details["max_exact_per_team"], join_field(field, "max_exact_per_team"), minimum=1)


_DETAILS: Mapping[str, Callable[[dict[str, Any], str], None]] = MappingProxyType(
    {
        "resync-required": _resync_details,
        "message-uuid-conflict": _conflict_details,
        "cipher-policy-violation": _policy_details,
        "unsupported-cipher": _unsupported_details,
        "unsupported-protocol-version": _version_details,
        "pairing-token-expired": _expired_details,
        "read-state-limit-exceeded": _limit_details,
    }
)


# --- the envelope -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """One error answer: HTTP status, code, message, details and binding members."""

    status: int
    code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)
    server_instance_id: str | None = None
    team_id: str | None = None
    team_name: str | None = None
    min_available_seq: int | None = None
    #: True when synthesized for a 502/503/504 page with no protocol envelope.
    intermediary: bool = False

    @property
    def spec(self) -> ErrorCode | None:
        """The table row, or ``None`` for a code this version does not know."""
        return ERROR_CODES.get(self.code)

    @property
    def retryable(self) -> bool:
        spec = self.spec
        return spec.retryable if spec is not None else is_retryable_status(self.status)

    @property
    def action(self) -> ClientAction:
        spec = self.spec
        if spec is not None:
            return spec.action
        return ClientAction.RETRY if is_retryable_status(self.status) else ClientAction.STOP

    def validate(self, field: str = "error") -> ErrorResponse:
        expect_int(self.status, "status", minimum=400, maximum=599)
        code_at = join_field(field, "code")
        if not isinstance(self.code, str) or _CODE.fullmatch(self.code) is None:
            raise SchemaError(code_at, "must be a lowercase error code")
        message = expect_str(self.message, join_field(field, "message"))
        if len(message) > _MAX_MESSAGE_CHARS:
            raise SchemaError(join_field(field, "message"), "message is too long")
        if not isinstance(self.details, Mapping):
            raise SchemaError(join_field(field, "details"), "must be a JSON object")
        spec = self.spec
        if spec is not None and self.status not in spec.statuses:
            raise SchemaError(code_at, f"{self.code} is never sent with HTTP {self.status}")
        self._validate_binding(spec)
        check_details = _DETAILS.get(self.code)
        if check_details is not None:
            check_details(dict(self.details), join_field(field, "details"))
        if self.code == "resync-required" and self.min_available_seq is not None:
            floor = parse_seq(self.details["min_available_seq"], "details.min_available_seq")
            if floor != self.min_available_seq:
                raise SchemaError(
                    "min_available_seq", "must equal details.min_available_seq in a 410"
                )
        return self

    def _validate_binding(self, spec: ErrorCode | None) -> None:
        if self.server_instance_id is not None:
            check_uuid7(self.server_instance_id, "server_instance_id")
        if self.team_id is not None:
            check_uuid7(self.team_id, "team_id")
            if self.server_instance_id is None:
                raise SchemaError("team_id", "a team_id needs its server_instance_id")
        if self.team_name is not None:
            check_team_name(self.team_name, "team_name")
        if self.min_available_seq is not None:
            format_seq(self.min_available_seq, "min_available_seq")
        if (self.team_name is not None or self.min_available_seq is not None) and (
            self.team_id is None
        ):
            raise SchemaError("team_id", "team members need the resolved team_id")
        rule = spec.binding if spec is not None else BindingRule.OPTIONAL
        if rule is BindingRule.REQUIRED and self.team_id is None:
            missing = "server_instance_id" if self.server_instance_id is None else "team_id"
            raise SchemaError(missing, f"a {self.code} error carries the resolved binding")
        if rule is BindingRule.FORBIDDEN and self.server_instance_id is not None:
            raise SchemaError(
                "server_instance_id", f"a {self.code} error precedes resolution: no binding"
            )

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        obj: dict[str, Any] = {"protocol_version": PROTOCOL_VERSION}
        if self.server_instance_id is not None:
            obj["server_instance_id"] = self.server_instance_id
        if self.team_id is not None:
            obj["team_id"] = self.team_id
        if self.team_name is not None:
            obj["team_name"] = self.team_name
        if self.min_available_seq is not None:
            obj["min_available_seq"] = format_seq(self.min_available_seq)
        obj["error"] = {"code": self.code, "message": self.message, "details": dict(self.details)}
        return obj

    @classmethod
    def from_obj(cls, value: Any, status: int, field: str = "") -> ErrorResponse:
        """Parse an error body received with HTTP ``status``."""
        optional = ("server_instance_id", "team_id", "team_name", "min_available_seq")
        obj = expect_object(value, field, ("protocol_version", "error"), optional, closed=False)
        check_protocol_version(obj["protocol_version"], join_field(field, "protocol_version"))
        error_at = join_field(field, "error")
        error = expect_object(obj["error"], error_at, ("code", "message", "details"), closed=False)
        details = expect_object(error["details"], join_field(error_at, "details"), (), closed=False)
        # Present means valid: an explicit null is not an omission.
        for name in ("server_instance_id", "team_id"):
            if name in obj:
                check_uuid7(obj[name], join_field(field, name))
        if "team_name" in obj:
            check_team_name(obj["team_name"], join_field(field, "team_name"))
        floor = None
        if "min_available_seq" in obj:
            floor = parse_seq(obj["min_available_seq"], join_field(field, "min_available_seq"))
        return cls(
            status=status,
            code=expect_str(error["code"], join_field(error_at, "code")),
            message=expect_str(error["message"], join_field(error_at, "message")),
            details=details,
            server_instance_id=obj.get("server_instance_id"),
            team_id=obj.get("team_id"),
            team_name=obj.get("team_name"),
            min_available_seq=floor,
        ).validate(error_at)

    def to_exception(self) -> RelayError:
        return RelayError(self)


def intermediary_failure(status: int) -> ErrorResponse:
    """A 502/503/504 page from a proxy, lacking the protocol envelope.

    v1.md: clients still apply the status-based retry rule (upstream issue
    #814: treating such a page as a protocol mismatch killed both engines).
    """
    if status not in (502, 503, 504):
        raise SchemaError("status", "only 502, 503 and 504 may come from an intermediary")
    return ErrorResponse(
        status=status,
        code="unavailable",
        message="intermediary failure without a protocol error envelope",
        intermediary=True,
    ).validate()


class RelayError(ProtocolError):
    """A parsed relay error, raised: ``status``, ``code``, ``details`` and binding."""

    def __init__(self, response: ErrorResponse) -> None:
        super().__init__(response.status, response.code, response.message, response.details)
        self.response = response
        self.server_instance_id = response.server_instance_id
        self.team_id = response.team_id
        self.retryable = response.retryable
        self.action = response.action
