"""``syncengine doctor``: every check an operator would make by hand, each
with a verdict and a remedy (issue #18, item 2).

Checks run in dependency order and stop descending where a prerequisite
failed (no binding → no credential check). Verdicts: ``ok``; ``warn``
(worth knowing, not broken: another engine is running, messages wait to
be pushed); ``fail`` (something needs fixing). ``doctor`` exits 0 only when
no check failed. It only reads: the store is opened read-only in effect
(no write transaction), and the relay sees two authenticated GETs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx

from syncengine.engine.engine import Engine
from syncengine.engine.errors import ConfigurationError, EngineError, EngineLocked, classify
from syncengine.engine.identity import read_identity
from syncengine.http.credentials import load_credential
from syncengine.http.errors import CredentialStoreError
from syncengine.local_store import Store
from syncengine.ops.history_counts import history_counts, recount_history
from syncengine.store.connection import read_transaction, refuse_unsafe_store
from syncengine.store.errors import StoreError, StoreUnsafe

__all__ = ["MAX_CLOCK_SKEW", "Check", "run_checks"]

#: Seconds between this machine's clock and the relay's ``Date`` worth a warning.
MAX_CLOCK_SKEW = 300.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    verdict: str  # ok | warn | fail
    detail: str
    remedy: str = ""

    def to_obj(self) -> dict[str, str]:
        return {
            "check": self.name,
            "verdict": self.verdict,
            "detail": self.detail,
            "remedy": self.remedy,
        }


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _store_file(path: Path) -> list[Check]:
    if not path.exists():
        return [
            Check(
                "store",
                "fail",
                f"no store at {path}",
                "Check --store / SYNCENGINE_STORE, or create it with 'syncengine driver init'.",
            )
        ]
    try:
        refuse_unsafe_store(path)
    except StoreUnsafe as exc:
        # Every command refuses this store; doctor says why and stops.
        return [Check("store-access", "fail", exc.problem, exc.remediation)]
    loose = [
        f"{p} is {oct(_mode(p))}"
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"))
        if p.exists() and _mode(p) & 0o077
    ]
    checks = [
        Check(
            "store-modes",
            "fail",
            "; ".join(loose),
            "The store holds decrypted bodies, and other users can read them: chmod 600 "
            "the store and its -wal/-shm files.",
        )
        if loose
        else Check("store-modes", "ok", f"{path} and its -wal/-shm files are private")
    ]
    if _mode(path.parent) & 0o077:
        checks.append(
            Check(
                "store-directory",
                "warn",
                f"{path.parent} is {oct(_mode(path.parent))}: others can list it",
                f"chmod 700 {path.parent}",
            )
        )
    return checks


def run_checks(
    store_path: str | os.PathLike[str] | None,
    team: str | None,
    *,
    transport: httpx.BaseTransport | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[Check]:
    with Store(store_path) as probe:
        path = probe.path.absolute()
    checks = _store_file(path)
    if checks[0].name in ("store", "store-access"):
        return checks  # nothing to open, or nothing any command would open
    try:
        with Store(path) as store:
            store.check()
        checks.append(Check("schema", "ok", "schema current, tables present, integrity ok"))
    except StoreError as exc:
        checks.append(
            Check(
                "schema",
                "fail",
                str(exc),
                "Restore the store from a backup, or rebuild it from the relay.",
            )
        )
        return checks
    try:
        engine = Engine(path, team, transport=transport)
    except (EngineError, StoreError) as exc:
        remedy = getattr(exc, "remediation", "Connect the team: syncengine connect …")
        checks.append(Check("binding", "fail", str(exc), remedy))
        return checks
    with engine:
        c = engine.connection
        checks.append(
            Check(
                "binding",
                "ok",
                f"team {c.local_team} -> {c.remote_team_name} ({c.remote_team_id}) at {c.endpoint}",
            )
        )
        checks += _files(engine)
        checks += _relay(engine, now)
        checks += _local_state(engine)
        try:
            with engine.lock():
                checks.append(Check("engine-lock", "ok", "no other engine holds this binding"))
        except EngineLocked:
            checks.append(
                Check(
                    "engine-lock",
                    "warn",
                    "another engine (run?) holds this binding",
                    "Nothing to fix if 'syncengine run' is meant to be running.",
                )
            )
    return checks


def _files(engine: Any) -> list[Check]:
    c = engine.connection
    checks = []
    path = Path(c.credential_path)
    if not path.is_absolute():
        checks.append(
            Check(
                "credential",
                "fail",
                f"the credential path {path} is relative",
                "Pair again from any directory: syncengine connect --replace …",
            )
        )
    else:
        try:
            load_credential(path, server_instance_id=c.server_instance_id, team_id=c.remote_team_id)
            checks.append(Check("credential", "ok", f"{path}: private, this binding's"))
        except CredentialStoreError as exc:
            checks.append(
                Check(
                    "credential",
                    "fail",
                    str(exc),
                    f"Restore it with mode 600, or pair again: syncengine connect "
                    f"--replace --team {c.local_team} --token @FILE",
                )
            )
    if c.age_key_id is None:
        return checks
    if c.identity_path is None:
        checks.append(
            Check(
                "identity",
                "warn",
                f"no identity for epoch {c.age_key_id}: sealed messages stay pending_key",
                f"syncengine security identity FILE --team {c.local_team}",
            )
        )
        return checks
    try:
        read_identity(c, Path(c.identity_path))
        checks.append(
            Check("identity", "ok", f"{c.identity_path} is a recipient of epoch {c.age_key_id}")
        )
    except ConfigurationError as exc:
        checks.append(Check("identity", "fail", str(exc), exc.remediation))
    return checks


def _relay(engine: Any, now: Callable[[], datetime]) -> list[Check]:
    c = engine.connection
    try:
        engine.client.health()
        caps = engine.client.capabilities()
    except Exception as exc:
        failure = classify(exc)
        return [Check("relay", "fail", f"{c.endpoint}: {failure.message}", failure.remediation)]
    checks = [
        Check(
            "relay",
            "ok",
            f"{c.endpoint} answers as instance {c.server_instance_id}, "
            f"protocol 1, current_seq {caps.current_seq}",
        )
    ]
    date = engine.client.last_date
    if date is None:
        checks.append(Check("clock", "warn", "the relay sent no Date header to compare with"))
        return checks
    try:
        skew = (now() - parsedate_to_datetime(date)).total_seconds()
    except (TypeError, ValueError):
        checks.append(Check("clock", "warn", "the relay's Date header is not a valid date"))
        return checks
    if abs(skew) > MAX_CLOCK_SKEW:
        checks.append(
            Check(
                "clock",
                "warn",
                f"this clock is {skew:+.0f} s off the relay's",
                "Run NTP (timedatectl set-ntp true): message times come from this clock.",
            )
        )
    else:
        checks.append(Check("clock", "ok", f"{skew:+.1f} s from the relay's clock"))
    return checks


def _counts(engine: Any, binding_pk: int) -> Check:
    """The totals ``status`` reads (kept by the writers, issue #17) against
    the rows themselves: a full read of the history, which is what a doctor
    is for."""
    with read_transaction(engine.store.conn, engine.store.path) as conn:
        kept, counted = history_counts(conn, binding_pk), recount_history(conn, binding_pk)
    if kept == counted:
        return Check("status-counts", "ok", "the counts status shows match the stored rows")
    names = ("reservations", "quarantine rows", "reconciled rows")
    detail = ", ".join(
        f"{name} {k} kept, {n} stored" for name, k, n in zip(names, kept, counted, strict=True)
    )
    return Check(
        "status-counts",
        "warn",
        f"status counts differ from the stored rows: {detail}",
        "Only 'syncengine status' counts are off; messages and sync are unaffected. "
        "Please report it with this output.",
    )


def _local_state(engine: Any) -> list[Check]:
    status = engine.status()
    e = status.engine
    c = engine.connection
    checks = []
    if e.halt_code is not None:
        checks.append(
            Check(
                "integrity",
                "fail",
                f"halted since {e.halt_at}: {e.halt_message}",
                f"Verify the relay, then: syncengine resume --team {c.local_team}",
            )
        )
    else:
        checks.append(Check("integrity", "ok", "no integrity halt"))
    if e.resync_required:
        obj = status.to_obj()["resync_required"]
        checks.append(
            Check(
                "retention",
                "fail",
                f"cursor {obj['after']} is below the relay floor {obj['min_available_seq']}",
                f"Approve the gap: {obj['command']}",
            )
        )
    blocked = status.messages_blocked
    if blocked:
        detail = ", ".join(f"{n} {s}" for s, n in blocked.items())
        checks.append(
            Check(
                "quarantine",
                "fail",
                f"pulled messages blocked: {detail}",
                "See 'syncengine status' for the remedy of each; "
                "'syncengine quarantine list' lists them.",
            )
        )
    else:
        checks.append(Check("quarantine", "ok", "no blocked messages" + _before_join(status)))
    checks.append(_counts(engine, c.binding_pk))
    pending = status.pending_push
    checks.append(
        Check(
            "pending-push",
            "warn" if pending else "ok",
            f"{pending} local message(s) not yet on the relay",
            "syncengine sync" if pending else "",
        )
    )
    return checks


def _before_join(status: Any) -> str:
    """The settled ``before_join`` count, said as what it is (issue #33): not
    a failure, so the quarantine check stays ok."""
    count = status.sync.quarantine.get("before_join", 0)
    if not count:
        return ""
    noun = "message" if count == 1 else "messages"
    return f"; {count} {noun} from before this machine joined; they cannot be opened here"
