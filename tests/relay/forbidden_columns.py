"""The relay columns that would hold secrets or plaintext; no relay table may have one
(retention and PostgreSQL schema tests)."""

from __future__ import annotations

FORBIDDEN_COLUMNS = {
    "from",
    "to",
    "from_agent",
    "to_agent",
    "sender",
    "recipient",
    "body",
    "created_at",
}
