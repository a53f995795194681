"""Kill every relay write transaction at both sides of its commit, reopen the
database, and prove it is wholly absent or wholly present (relay/crash.py).

* The batch insert end to end: a real relay process on 127.0.0.1 started
  with ``SYNCENGINE_CRASH_AT=relay.post.<before|after>_commit`` dies (77)
  under a real ``syncengine push``, which fails as a transient transport
  error rather than hanging; a relay restarted on the same database and port
  takes the identical re-push — stored on the retry after ``before_commit``,
  acked ``duplicate`` after ``after_commit`` — and both machines and the
  relay hold every message exactly once.
* Every point (the batch insert included, alone and with automatic
  retention): the database is prepared in-process in a known state; a child
  process (``python -c``, one ``SqliteRelayStore`` call unpickled from
  stdin) runs the operation with the point armed and must exit 77 having
  written nothing to stdout. After reopening, ``PRAGMA integrity_check`` is
  ``ok``; ``before_commit`` leaves every row of every table as it was, and
  ``after_commit`` leaves exactly the rows of a crash-free run of the same
  call on a copy of the prepared database, plus per-operation checks through
  the store API. The caller's natural retry then behaves as documented on
  each operation (idempotent ones change nothing after a committed crash).
* ``relay init``: before its commit the file holds no schema and no
  ``server_instance_id``; after it, a complete 0600 database that serves.
* Bookkeeping: the cases cover exactly ``RELAY_CRASH_POINTS``, every
  ``_run`` that may write in relay/storage/operations.py names a listed
  transaction, and no point fires outside its own transaction (nor in a
  read-only read-state sync).
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import pickle
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from relay.crash import CRASH_EXIT_CODE, RELAY_CRASH_POINTS, RELAY_TRANSACTIONS
from relay.errors import PairingTokenConsumed, Unauthenticated
from relay.secrets import hash_secret, timestamp
from relay.storage import operations as operations_module
from relay.storage import sqlite as sqlite_module
from relay.storage.records import (
    Access,
    IncomingMessage,
    Member,
    ProvisioningDocument,
    ReadStateRequest,
    ReadUpdate,
    TeamStatus,
)
from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine.errors import EXIT_TRANSIENT
from tests.support.live_relay import running_relay
from tests.support.machines import LeanTeam, exactly_once, relay_counts, relay_port, run_cli
from wire.envelope import Envelope

REPO = Path(__file__).resolve().parents[1]

#: The child: one store call (method, args, store kwargs) unpickled from stdin.
CHILD = """
import pickle, sys
from relay.storage import sqlite as sqlite_module
from relay.storage.sqlite import SqliteRelayStore
method, args, kwargs = pickle.load(sys.stdin.buffer)
if method == "initialize":
    SqliteRelayStore.initialize(sys.argv[1])
else:
    getattr(SqliteRelayStore(sys.argv[1], **kwargs), method)(*args)
"""

WHEN = ("before", "after")

# -- a fixed relay state (fixed IDs and times, so runs are comparable row by row) --

T0 = datetime(2026, 7, 20, 6, 30, tzinfo=UTC)
NOW = timestamp(T0)
LATER = timestamp(T0 + timedelta(minutes=1))
EXPIRES = timestamp(T0 + timedelta(minutes=15))
TEAM = "01900000-0000-7000-8000-000000000001"
ALICE = "01900000-0000-7000-8000-0000000000a1"
BOB = "01900000-0000-7000-8000-0000000000b1"
CAROL = "01900000-0000-7000-8000-0000000000c1"
WIRE = [f"00000000-0000-4000-8000-{i:012d}" for i in range(6)]
TOKENS = [hash_secret(f"agmsg-pair-test-{i}") for i in range(3)]
CREDENTIALS = ["01900000-0000-7000-8000-0000000000d1", "01900000-0000-7000-8000-0000000000d2"]
SECRETS = [hash_secret(f"agmsg-cred-test-{i}") for i in range(2)]
ACCESS = Access(TEAM, SECRETS[0])


def _message(i: int) -> IncomingMessage:
    envelope = Envelope.from_blob_bytes("none", None, f"payload {i}".encode())
    return IncomingMessage(WIRE[i], envelope, envelope.digest())


def _prepare(db: Path) -> None:
    """Team ``crew`` (alice, bob), credential 0 paired, token 1 unconsumed,
    messages 0-2 at seqs 1-3, bob's read state: frontier 1 + exact seq 2."""
    SqliteRelayStore.initialize(db)
    store = SqliteRelayStore(db)
    try:
        roster = (Member(ALICE, "alice"), Member(BOB, "bob"))
        store.apply_provisioning(ProvisioningDocument(TEAM, "crew", roster), NOW)
        store.issue_pairing_token(TEAM, TOKENS[0], "laptop", NOW, EXPIRES)
        store.exchange_pairing_token(TOKENS[0], CREDENTIALS[0], SECRETS[0], NOW)
        store.issue_pairing_token(TEAM, TOKENS[1], "desk", NOW, EXPIRES)
        store.post_messages(ACCESS, [_message(i) for i in range(3)], NOW)
        update = ReadUpdate(BOB, 1, (WIRE[1],))
        store.sync_read_state(ACCESS, ReadStateRequest((update,), None, 100))
    finally:
        store.close()


# -- observing a database ------------------------------------------------------------


def _sql(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]
    finally:
        conn.close()


def _raw(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table."""
    tables = _sql(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return {name: sorted(_sql(db, f'SELECT * FROM "{name}"'), key=repr) for (name,) in tables}


def _integrity_ok(db: Path) -> None:
    assert _sql(db, "PRAGMA integrity_check") == [("ok",)]


def _copy(db: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{db}{suffix}")
        if side.exists():
            shutil.copy2(side, f"{target}{suffix}")
    return target


def _team(store: SqliteRelayStore) -> TeamStatus:
    return next(t for t in store.status().teams if t.team_id == TEAM)


# -- the operations -----------------------------------------------------------------

Store = SqliteRelayStore  # short for the signatures below


@dataclass(frozen=True)
class Operation:
    """One store call, its whole effect, and the caller's retry."""

    transaction: str
    method: str
    args: tuple[Any, ...]
    #: Asserts the call's whole effect is in the database (through the store).
    effect: Callable[[Store, Path], None]
    #: Runs the caller's retry of the same call and asserts its outcome;
    #: the argument says whether the crashed call had committed.
    retry: Callable[[Store, bool], None] | None = None
    #: A retry after a committed crash changes no row.
    idempotent: bool = True
    store_kwargs: dict[str, Any] = field(default_factory=dict)


# relay.provision: a re-apply renames the team, adds carol and retires bob
# (and his read state) — the atomic roster replace.
PROVISION = ProvisioningDocument(TEAM, "crew-2", (Member(ALICE, "alice"), Member(CAROL, "carol")))


def _provision_effect(store: Store, db: Path) -> None:
    team = _team(store)
    assert (team.team_name, team.members_revision, team.active_members) == ("crew-2", 1, 2)
    roster = store.members(ACCESS)
    assert [m.name for m in roster.members] == ["alice", "carol"]
    items = store.sync_read_state(ACCESS, ReadStateRequest((), None, 100)).items
    assert [i.key.member_id for i in items] == [ALICE, CAROL]  # bob's read state is gone


def _provision_retry(store: Store, committed: bool) -> None:
    summary = store.apply_provisioning(PROVISION, LATER)
    assert not summary.created
    assert summary.members_revision == (2 if committed else 1)  # every re-apply counts


# relay.token_issue: one more unconsumed token. The CLI mints a fresh token
# on every issue, so there is no retry of *this* token to check.
def _token_effect(store: Store, db: Path) -> None:
    rows = _sql(
        db,
        "SELECT device_name, issued_at, consumed_at FROM pairing_tokens WHERE token_hash = ?",
        (TOKENS[2],),
    )
    assert rows == [("phone", LATER, None)]


# relay.pairing: token 1 becomes credential 1.
def _pairing_effect(store: Store, db: Path) -> None:
    assert store.authorize(Access(TEAM, SECRETS[1])).team_id == TEAM
    paired = [c for c in store.list_credentials(TEAM) if c.credential_id == CREDENTIALS[1]]
    assert [(c.device_name, c.paired_at, c.revoked_at) for c in paired] == [("desk", LATER, None)]


def _pairing_retry(store: Store, committed: bool) -> None:
    # The device never saw an answer, so it re-sends the same token.
    if committed:
        # The token was spent on a credential the device never learnt: it
        # needs a new token (and the operator may revoke the orphan).
        with pytest.raises(PairingTokenConsumed):
            store.exchange_pairing_token(TOKENS[1], CREDENTIALS[1], SECRETS[1], LATER)
    else:
        store.exchange_pairing_token(TOKENS[1], CREDENTIALS[1], SECRETS[1], LATER)


# relay.post: two new messages and a re-sent one.
POST_BATCH = [_message(3), _message(4), _message(0)]


def _post_effect(store: Store, db: Path) -> None:
    page = store.page_messages(ACCESS, 0, 100)
    assert [m.wire_id for m in page.messages] == WIRE[:5]
    assert [m.server_seq for m in page.messages] == [1, 2, 3, 4, 5]
    assert [m.server_received_at for m in page.messages[3:]] == [LATER, LATER]
    assert store.capabilities(ACCESS).current_seq == 5


def _post_retry(store: Store, committed: bool) -> None:
    acks = store.post_messages(ACCESS, POST_BATCH, LATER).acks
    dispositions = ["duplicate"] * 3 if committed else ["stored", "stored", "duplicate"]
    assert [(a.wire_id, a.server_seq, a.disposition) for a in acks] == list(
        zip(WIRE[3:5] + WIRE[:1], [4, 5, 1], dispositions, strict=True)
    )


# relay.post with automatic retention (at most two live messages): the
# batch and the floor it raises commit together.
def _retained_post_effect(store: Store, db: Path) -> None:
    team = _team(store)
    assert (team.current_seq, team.min_available_seq, team.live_messages) == (5, 3, 2)


def _retained_post_retry(store: Store, committed: bool) -> None:
    result = store.post_messages(ACCESS, POST_BATCH[:2], LATER)
    assert [a.disposition for a in result.acks] == ["duplicate" if committed else "stored"] * 2
    assert (result.retention is None) == committed
    assert result.binding.min_available_seq == 3


# relay.read_state: alice's frontier and one exact read above it.
READ = ReadStateRequest((ReadUpdate(ALICE, 1, (WIRE[2],)),), None, 100)


def _read_effect(store: Store, db: Path) -> None:
    items = store.sync_read_state(ACCESS, ReadStateRequest((), None, 100)).items
    alice = [
        (i.key.kind_order, i.key.wire_id, i.server_seq) for i in items if i.key.member_id == ALICE
    ]
    assert alice == [(0, "", 1), (1, WIRE[2], None)]


def _read_retry(store: Store, committed: bool) -> None:
    store.sync_read_state(ACCESS, READ)


# relay.revoke (self-revoke) and relay.credential_revoke (operator).
def _revoked_effect(store: Store, db: Path) -> None:
    with pytest.raises(Unauthenticated):
        store.authorize(ACCESS)
    info = next(c for c in store.list_credentials(TEAM) if c.credential_id == CREDENTIALS[0])
    assert info.revoked_at == LATER


def _revoke_retry(store: Store, committed: bool) -> None:
    # A revoked credential may still revoke itself: the retry learns the outcome.
    assert store.revoke_own_credential(ACCESS, CREDENTIALS[0], LATER).revoked_at == LATER


def _credential_revoke_retry(store: Store, committed: bool) -> None:
    assert store.revoke_credential(TEAM, CREDENTIALS[0], LATER).revoked_at == LATER


# relay.policy: only age-v1 from the next sequence.
def _policy_effect(store: Store, db: Path) -> None:
    history = store.capabilities(ACCESS).policy_history
    assert [(p.policy_revision, p.effective_from_seq) for p in history] == [(0, 1), (1, 4)]
    assert history[-1].write_allowed_ciphers == ("age-v1",)


def _policy_retry(store: Store, committed: bool) -> None:
    entry = store.set_policy(TEAM, ["age-v1"])
    # Same boundary: a committed revision is superseded in place, never stacked.
    assert (entry.policy_revision, entry.effective_from_seq) == (2 if committed else 1, 4)
    assert len(store.capabilities(ACCESS).policy_history) == 2


# relay.retain: floor 2; bob's frontier is max-merged to it and his exact
# read of seq 2 is collected; the tombstones stay.
def _retain_effect(store: Store, db: Path) -> None:
    team = _team(store)
    assert (team.current_seq, team.min_available_seq, team.live_messages) == (3, 2, 1)
    items = store.sync_read_state(ACCESS, ReadStateRequest((), None, 100)).items
    bob = [(i.key.kind_order, i.server_seq) for i in items if i.key.member_id == BOB]
    assert bob == [(0, 2)]


def _retain_retry(store: Store, committed: bool) -> None:
    result = store.retain(TEAM, 2)
    assert (result.new_floor, result.rows_removed) == (2, 0 if committed else 2)


OPERATIONS: dict[str, Operation] = {
    op.transaction if not op.store_kwargs else f"{op.transaction}+retention": op
    for op in (
        Operation("relay.provision", "apply_provisioning", (PROVISION, LATER),
                  _provision_effect, _provision_retry, idempotent=False),
        Operation("relay.token_issue", "issue_pairing_token",
                  (TEAM, TOKENS[2], "phone", LATER, EXPIRES), _token_effect),
        Operation("relay.pairing", "exchange_pairing_token",
                  (TOKENS[1], CREDENTIALS[1], SECRETS[1], LATER), _pairing_effect, _pairing_retry),
        Operation("relay.post", "post_messages", (ACCESS, POST_BATCH, LATER),
                  _post_effect, _post_retry),
        Operation("relay.post", "post_messages", (ACCESS, POST_BATCH[:2], LATER),
                  _retained_post_effect, _retained_post_retry,
                  store_kwargs={"retention_max_live_messages": 2}),
        Operation("relay.read_state", "sync_read_state", (ACCESS, READ), _read_effect, _read_retry),
        Operation("relay.revoke", "revoke_own_credential", (ACCESS, CREDENTIALS[0], LATER),
                  _revoked_effect, _revoke_retry),
        Operation("relay.credential_revoke", "revoke_credential", (TEAM, CREDENTIALS[0], LATER),
                  _revoked_effect, _credential_revoke_retry),
        Operation("relay.policy", "set_policy", (TEAM, ["age-v1"]), _policy_effect, _policy_retry,
                  idempotent=False),
        Operation("relay.retain", "retain", (TEAM, 2), _retain_effect, _retain_retry),
    )
}  # fmt: skip


def _run_child(
    db: Path,
    method: str,
    args: tuple[Any, ...],
    armed: str,
    store_kwargs: dict[str, Any] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(db)],
        input=pickle.dumps((method, args, store_kwargs or {})),
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "SYNCENGINE_CRASH_AT": armed},
        timeout=60,
        check=False,
    )


def _open(db: Path, op: Operation) -> SqliteRelayStore:
    return SqliteRelayStore(db, **op.store_kwargs)


# -- the tests ----------------------------------------------------------------------


def test_the_tests_cover_exactly_the_relay_crash_points() -> None:
    covered = {op.transaction for op in OPERATIONS.values()} | {"relay.init"}
    assert covered == set(RELAY_TRANSACTIONS)
    points = {f"{name}.{when}_commit" for name in covered for when in WHEN}
    assert points == set(RELAY_CRASH_POINTS)
    assert len(RELAY_CRASH_POINTS) == len(set(RELAY_CRASH_POINTS))


def test_every_write_transaction_of_the_store_is_named() -> None:
    """Each ``self._run`` that may write names a listed transaction, and
    ``initialize`` (its own connection) passes the ``relay.init`` points."""
    source = "\n".join(inspect.getsource(module) for module in (sqlite_module, operations_module))
    named: list[str] = []
    points: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        if isinstance(callee, ast.Attribute) and callee.attr == "_run":
            first = node.args[0]
            if isinstance(first, ast.Constant) and first.value is False:
                continue  # a read transaction
            last = node.args[-1]
            assert len(node.args) == 3 and isinstance(last, ast.Constant), ast.unparse(node)
            named.append(str(last.value))
        elif isinstance(callee, ast.Name) and callee.id == "crash_point":
            points += [str(a.value) for a in node.args if isinstance(a, ast.Constant)]
    assert sorted(named) == sorted(t for t in RELAY_TRANSACTIONS if t != "relay.init")
    assert points == ["relay.init.before_commit", "relay.init.after_commit"]


def test_no_point_fires_outside_its_own_transaction(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    _prepare(db)
    op = OPERATIONS["relay.post"]
    other = _run_child(db, op.method, op.args, "relay.retain.before_commit")
    assert other.returncode == 0, other.stderr.decode()
    # A read-state sync without updates is a read transaction: no points.
    empty = ReadStateRequest((), None, 100)
    read = _run_child(db, "sync_read_state", (ACCESS, empty), "relay.read_state.before_commit")
    assert read.returncode == 0, read.stderr.decode()
    store = SqliteRelayStore(db)
    try:
        op.effect(store, db)
    finally:
        store.close()


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("case", list(OPERATIONS))
def test_a_crash_leaves_the_transaction_whole_or_absent(
    tmp_path: Path, case: str, when: str
) -> None:
    op = OPERATIONS[case]
    committed = when == "after"
    db = tmp_path / "crashed" / "relay.db"
    db.parent.mkdir()
    _prepare(db)
    prepared = _raw(db)

    # The crash-free run of the same call on a copy of the prepared database.
    reference = _copy(db, tmp_path / "reference" / "relay.db")
    store = _open(reference, op)
    try:
        getattr(store, op.method)(*op.args)
    finally:
        store.close()
    once = _raw(reference)
    assert once != prepared, "the operation must change the prepared database"

    point = f"{op.transaction}.{when}_commit"
    proc = _run_child(db, op.method, op.args, point, op.store_kwargs)
    assert proc.returncode == CRASH_EXIT_CODE, (point, proc.returncode, proc.stderr.decode())
    assert proc.stdout == b""

    _integrity_ok(db)
    crashed = _raw(db)
    if committed:
        assert crashed == once, "a committed transaction must be whole"
    else:
        assert crashed == prepared, "a crash before commit must leave no trace"
    store = _open(db, op)
    try:
        if committed:
            op.effect(store, db)
        if op.retry is not None:
            op.retry(store, committed)
    finally:
        store.close()
    _integrity_ok(db)
    if op.retry is not None:
        if not committed:
            assert _raw(db) == once, "the retry of an absent call is the crash-free run"
        elif op.idempotent:
            assert _raw(db) == crashed, "the retry of a committed call changes nothing"


@pytest.mark.parametrize("when", WHEN)
def test_init_killed_at_its_commit(tmp_path: Path, when: str) -> None:
    db = tmp_path / "relay.db"
    proc = _run_child(db, "initialize", (), f"relay.init.{when}_commit")
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr.decode()
    assert proc.stdout == b""
    for suffix in ("", "-wal", "-shm"):
        side = Path(f"{db}{suffix}")
        if side.exists():
            assert stat.S_IMODE(side.stat().st_mode) == 0o600, side
    _integrity_ok(db)
    tables = [name for (name,) in _sql(db, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    if when == "before":
        # No schema and no server identity: nothing a relay could serve from,
        # and ``init`` run again takes the empty file over.
        assert tables == []
        instance_id = SqliteRelayStore.initialize(db)
        store = SqliteRelayStore(db)
        try:
            assert store.server_instance_id == instance_id
        finally:
            store.close()
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
        return
    assert set(tables) >= {"relay_meta", "teams", "messages", "wire_ids", "credentials"}
    ((instance_id,),) = _sql(db, "SELECT value FROM relay_meta WHERE key = 'server_instance_id'")
    store = SqliteRelayStore(db)
    try:
        assert store.server_instance_id == instance_id
        store.apply_provisioning(ProvisioningDocument(TEAM, "crew", (Member(ALICE, "alice"),)), NOW)
        assert [t.team_id for t in store.status().teams] == [TEAM]
    finally:
        store.close()


@pytest.mark.parametrize("when", WHEN)
def test_relay_killed_at_the_post_commit_restarts_and_the_repush_lands_exactly_once(
    tmp_path: Path, when: str
) -> None:
    db = tmp_path / "relay.db"
    armed = {"SYNCENGINE_CRASH_AT": f"relay.post.{when}_commit"}
    with running_relay(db, "--no-access-log", env=armed) as doomed:
        team = LeanTeam(doomed, tmp_path)
        a, b = team.machine("a"), team.machine("b")
        port = relay_port(doomed)
        a.send("alice", "bob", "m1", "m2", "m3")
        crashed = run_cli(a, "push", "--json", timeout=90)
        assert doomed.process.wait(timeout=30) == CRASH_EXIT_CODE
    # The relay vanished mid-request: an unknown outcome, retried, then a
    # transient failure — never a hang, never a false success.
    assert crashed.returncode == EXIT_TRANSIENT, (crashed.stdout, crashed.stderr)
    error = json.loads(crashed.stdout)["error"]
    assert (error["code"], error["state"]) == ("transport-error", "backoff")
    stored = relay_counts(doomed, team.id)
    assert stored == ((0, 0) if when == "before" else (3, 3))
    _integrity_ok(db)

    with running_relay(db, "--no-access-log", "--port", str(port)) as relay:
        assert relay.server_instance_id == doomed.server_instance_id
        pushed = run_cli(a, "push", "--json", timeout=90)
        assert pushed.returncode == 0, pushed.stderr
        push = json.loads(pushed.stdout)["push"]
        assert push["candidates"] == 3
        assert (push["stored"], push["duplicate"]) == ((3, 0) if when == "before" else (0, 3))
        b.sync()
        a.sync()
        expected = [("alice", "bob", body) for body in ("m1", "m2", "m3")]
        assert exactly_once(a) == exactly_once(b) == expected
        assert relay_counts(relay, team.id) == (3, 3)
        assert a.sync().push.candidates == 0  # acked durably: nothing left to re-send
