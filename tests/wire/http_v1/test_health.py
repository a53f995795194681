"""Health documents (v1.md "GET /v1/health"; team_id optional by decision)."""

from __future__ import annotations

import pytest

from tests.wire.http_v1 import samples
from tests.wire.http_v1.helpers import field_of
from wire.errors import SchemaError
from wire.http_v1 import Health, HealthStatus


def test_ready_health_is_accepted() -> None:
    health = Health.from_obj(samples.health(), http_status=200)
    assert health.status is HealthStatus.OK
    assert health.server_instance_id == samples.SERVER
    assert health.team_id is None


def test_health_team_id_is_optional_but_checked_when_present() -> None:
    doc = samples.health()
    doc["team_id"] = samples.TEAM
    assert Health.from_obj(doc).team_id == samples.TEAM
    doc["team_id"] = "not-a-uuid"
    assert field_of(Health.from_obj, doc, error=SchemaError) == "health.team_id"


def test_ready_health_must_name_its_instance() -> None:
    doc = samples.health()
    del doc["server_instance_id"]
    assert field_of(Health.from_obj, doc, error=SchemaError) == "health.server_instance_id"


def test_unavailable_health_may_omit_the_instance() -> None:
    doc = {
        "status": "unavailable",
        "protocol": {"supported_versions": [1]},
        "database": "unavailable",
    }
    health = Health.from_obj(doc, http_status=503)
    assert health.server_instance_id is None
    assert health.to_obj() == doc


def test_explicit_null_instance_is_not_an_omission() -> None:
    doc = {
        "status": "unavailable",
        "server_instance_id": None,
        "protocol": {"supported_versions": [1]},
        "database": "unavailable",
    }
    assert field_of(Health.from_obj, doc, error=SchemaError) == "health.server_instance_id"


def test_database_must_mirror_status() -> None:
    doc = samples.health()
    doc["database"] = "unavailable"
    assert field_of(Health.from_obj, doc, error=SchemaError) == "health.database"


def test_status_must_match_http_status() -> None:
    assert (
        field_of(Health.from_obj, samples.health(), http_status=503, error=SchemaError)
        == "health.status"
    )


def test_supported_versions_must_be_non_empty() -> None:
    doc = samples.health()
    doc["protocol"]["supported_versions"] = []
    assert field_of(Health.from_obj, doc, error=SchemaError) == "health.protocol.supported_versions"


def test_unknown_status_is_rejected() -> None:
    doc = samples.health()
    doc["status"] = "degraded"
    assert field_of(Health.from_obj, doc, error=SchemaError) == "health.status"


def test_team_id_without_instance_cannot_be_built() -> None:
    with pytest.raises(SchemaError):
        Health(HealthStatus.UNAVAILABLE, (1,), None, samples.TEAM).to_obj()
