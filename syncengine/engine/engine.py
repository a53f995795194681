"""The :class:`Engine` facade: one store, one connected team, one relay.

It owns the relay client (built from the durable connection and the 0600
credential file), reads the identity file at most once per process, runs
the cycle steps of :mod:`syncengine.engine.cycle`, and records the outcome
of every operation in the store (``engine_status``) in one transaction —
success, failure with its remedy, and the durable resync-required marker
(specs/engine.md §2.3). It never exits the process and
never moves a cursor outside the Stage-1 operations.

Usage::

    with Engine(store_path) as engine:      # the only connected team, or team=...
        engine.sync()                       # push then pull
        print(engine.status().to_obj())
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from syncengine.crash import crash_point
from syncengine.engine import state as st
from syncengine.engine.epochs import EpochHistory, EpochSnapshot, KeyEpoch
from syncengine.engine.errors import (
    ConfigurationError,
    IntegrityHalted,
    StopRequested,
    classify,
)
from syncengine.engine.limits import (
    CATCH_UP_PUSH_LIMIT,
    LIVE_WAIT_MARGIN,
    PULL_PAGE_LIMIT,
    REPROCESS_PAGE_LIMIT,
    STEADY_PUSH_LIMIT,
)
from syncengine.engine.lock import EngineLock, lock_path_for
from syncengine.engine.progress import progress_for
from syncengine.engine.security import SecurityEntry, SecurityHistory, SecurityMode
from syncengine.engine.workers import MIN_PARALLEL_BATCH, Workers
from syncengine.http.errors import EngineState, RelayRollback, ResyncRequired
from syncengine.local_store import Store
from syncengine.ops.states import QUARANTINE_STATES
from syncengine.store import teams
from syncengine.store.connection import read_transaction, store_exposure, write_transaction
from wire.scalars import format_timestamp

if TYPE_CHECKING:
    import apsw
    import httpx

    # What only some commands use is imported where it is used: ``status``
    # loads no cycle and no HTTP stack, an idle ``pull`` no resync or
    # quarantine listing (start-up cost, issue #17).
    from syncengine.engine.context import CycleContext
    from syncengine.engine.read_sync import ReadStateReport
    from syncengine.engine.reports import PullReport, PushReport, ReprocessReport
    from syncengine.engine.resync import ResyncReport
    from syncengine.engine.watched_client import WatchedClient
    from syncengine.http.client import ClientConfig, RelayClient
    from syncengine.ops.quarantine import BlockedEnvelope
    from syncengine.ops.status import SyncStatus
    from wire.http_v1.capabilities import Capabilities

__all__ = ["Engine", "EngineStatus", "SyncReport"]

T = TypeVar("T")
C = TypeVar("C", bound="RelayClient")

_log = logging.getLogger("syncengine.engine")

#: States in which a push failure still lets the same cycle pull: the relay
#: refused *writes* (policy, 507, an oversized message), not the stream.
_PULL_DESPITE_PUSH = frozenset(
    {EngineState.REFUSED, EngineState.ADJUST, EngineState.WRITES_STOPPED}
)


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


@dataclass(frozen=True, slots=True)
class SyncReport:
    """One ``sync``: the push half and the pull half."""

    push: PushReport
    pull: PullReport

    @property
    def saturated(self) -> bool:
        return self.push.saturated


@dataclass(frozen=True, slots=True)
class EngineStatus:
    """Everything ``syncengine status`` answers, from one store snapshot."""

    connection: st.ConnectionRecord
    history: SecurityHistory
    sync: SyncStatus
    pending_push: int
    engine: st.EngineStatusRow
    lock_path: Path
    store_path: Path
    #: Things worth fixing that do not stop syncing (issue #33): today a
    #: store other users can read (store.connection.store_exposure).
    warnings: tuple[str, ...] = ()

    @property
    def resync_required(self) -> bool:
        return self.engine.resync_required

    @property
    def messages_blocked(self) -> dict[str, int]:
        """Quarantined envelopes per blocking status (none imported yet)."""
        # QUARANTINE_STATES comes from ops.states, which the store already
        # loaded, not from the quarantine listing's module: ``status``
        # imports no more (issue #17, start-up).
        return {
            status: count
            for status, count in sorted(self.sync.quarantine.items())
            if count and status in QUARANTINE_STATES and QUARANTINE_STATES[status].blocking
        }

    @property
    def state(self) -> str:
        """The durable engine state — except that a healthy engine with
        blocked messages says ``blocked``: ``ok`` would hide messages this
        machine cannot read (issue #15, item 4)."""
        if self.engine.state == "ok" and self.messages_blocked:
            return "blocked"
        return self.engine.state

    def to_obj(self) -> dict[str, Any]:
        # start-up pin: idle pull loads no syncengine.engine.quarantine
        from syncengine.engine.quarantine import blocked_remedy

        c, e, b = self.connection, self.engine, self.sync.binding
        last_failure = None
        if e.last_failure_at is not None:
            last_failure = {
                "at": e.last_failure_at,
                "code": e.last_error_code,
                "class": e.last_error_class,
                "http_status": e.last_error_http_status,
                "message": e.last_error_message,
                "remediation": e.last_error_remediation,
            }
        resync = None
        if e.resync_required:
            # start-up pin: status loads no syncengine.engine.resync
            from syncengine.engine.resync import resync_command

            assert e.resync_after is not None and e.resync_min_available_seq is not None
            command = resync_command(c.local_team, e.resync_min_available_seq, str(self.store_path))
            resync = {
                "after": str(e.resync_after),
                "min_available_seq": str(e.resync_min_available_seq),
                "unavailable": e.resync_min_available_seq - e.resync_after,
                "recorded_at": e.resync_recorded_at,
                "command": command,
                "remediation": f"{ResyncRequired.remediation} Approve the gap: {command}",
            }
        return {
            "team": c.local_team,
            "endpoint": c.endpoint,
            "server_instance_id": c.server_instance_id,
            "remote_team_id": c.remote_team_id,
            "remote_team_name": c.remote_team_name,
            "protocol_version": c.protocol_version,
            "credential_id": c.credential_id,
            "credential_file": c.credential_path,
            "connected_at": c.connected_at,
            "security": {
                "mode": self.history.current.mode.value,
                "history": [
                    {
                        "local_security_revision": str(x.revision),
                        "effective_from_seq": str(x.effective_from_seq),
                        "minimum_security_mode": x.mode.value,
                    }
                    for x in self.history.entries
                ],
                "age_v1": None
                if c.age_key_id is None
                else {
                    "key_id": c.age_key_id,
                    "recipients": len(c.age_recipients),
                    "identity_file": c.identity_path,
                    "epochs": [e.to_obj() for e in c.epochs.epochs],
                },
            },
            "cursors": {
                "push": str(b.push_cursor if b else 0),
                "transport": str(b.transport_cursor if b else 0),
            },
            "pending_push": self.pending_push,
            "reservations": dict(sorted(self.sync.reservations.items())),
            "quarantine": dict(sorted(self.sync.quarantine.items())),
            "conflicts": self.sync.conflicts,
            "blocked_messages": [
                {"local_id": m.local_id, "limit": m.limit, "reason": m.reason}
                for m in self.sync.blocked
            ],
            "state": self.state,
            "messages_blocked": [
                {"status": status, "count": count, "remediation": blocked_remedy(status, c)}
                for status, count in self.messages_blocked.items()
            ],
            "last_success_at": e.last_success_at,
            "failures_since_success": e.failures_since_success,
            "last_failure": last_failure,
            "resync_required": resync,
            "integrity_halt": None
            if e.halt_code is None
            else {
                "code": e.halt_code,
                "message": e.halt_message,
                "at": e.halt_at,
                "remediation": "Verify the relay before syncing again, then run: "
                f"syncengine resume --team {c.local_team}",
            },
            "read_state": {
                "floor": str(self.sync.read_floor),
                "members": [
                    {
                        "name": m.name,
                        "member_id": m.member_id,
                        "local_frontier": str(m.local_frontier),
                        "remote_frontier": str(m.remote_frontier),
                        "local_exact": m.local_exact,
                        "remote_exact": m.remote_exact,
                        "pending_upload": m.pending_upload,
                        "blocked": None
                        if m.blocked_reason is None
                        else {"reason": m.blocked_reason, "detail": m.blocked_detail},
                    }
                    for m in self.sync.read_members
                ],
            },
            "accepted_gaps": [
                {**gap.to_obj(), "unavailable": gap.unavailable} for gap in self.sync.accepted_gaps
            ],
            "lock_file": str(self.lock_path),
            "warnings": list(self.warnings),
        }


class Engine:
    """The sync engine for one connected team of one store.

    ``team`` may be omitted when the store has exactly one connected team.
    ``transport``, ``client_config``, ``sleep`` and ``clock`` reach the
    relay client (tests inject them); ``sleep`` is also how the run loop
    interrupts a retry wait on SIGTERM. ``progress_stream`` receives
    counts and rates on long transfers, only when it is a TTY.
    ``workers`` is how many worker processes may seal and open large age-v1
    batches (:mod:`syncengine.engine.workers`); the default 0 keeps all work
    in this process, because a worker imports the caller's main module (the
    usual ``multiprocessing`` rule); the CLI passes
    :func:`~syncengine.engine.workers.worker_count`.
    """

    def __init__(
        self,
        store_path: str | os.PathLike[str] | None = None,
        team: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        client_config: ClientConfig | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        progress_stream: TextIO | None = None,
        workers: int = 0,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self.store = Store(store_path)
        try:
            with read_transaction(self.store.conn, self.store.path) as conn:
                self.connection = st.connection_for(conn, team)
        except BaseException:
            self.store.close()
            raise
        self._transport = transport
        self._client_config = client_config
        self._sleep = sleep
        self._interrupt = interrupt
        self._clock = clock
        self._progress = progress_for(progress_stream)
        self._client: WatchedClient | None = None
        #: The newest (floor, current_seq) seen; loaded on the first snapshot.
        self._seen: tuple[int, int] | None = None
        #: The last roster document adopted and its ``roster_pairs``.
        self._roster_from: tuple[Any, list[tuple[str, str]]] | None = None
        self._identities: dict[str, object | None] = {}
        self._workers: Workers | None = None
        self._worker_processes = workers

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        if self._client is not None:
            self._client.close()
            self._client = None
        self.store.close()

    def lock(self) -> EngineLock:
        """The (not yet acquired) exclusive lock of this binding."""
        c = self.connection
        return EngineLock(lock_path_for(self.store.path, c.server_instance_id, c.remote_team_id))

    # -- plumbing -----------------------------------------------------------------------

    @property
    def client(self) -> RelayClient:
        if self._client is None:
            # The HTTP stack is imported only when the relay is needed
            # (``status`` and the local commands never load it).
            from syncengine.engine.watched_client import WatchedClient

            self._client = self._new_client(WatchedClient, self._client_config)
            self._client.watch = self._observe
        return self._client

    def _new_client(self, kind: type[C], config: ClientConfig | None) -> C:
        # start-up pin (HTTP_STACK): only this path loads h11
        from syncengine.http.client import RelayBinding

        # start-up pin: status loads no syncengine.http.credentials
        from syncengine.http.credentials import load_credential

        c = self.connection
        credential = load_credential(
            Path(c.credential_path),
            server_instance_id=c.server_instance_id,
            team_id=c.remote_team_id,
        )
        return kind(
            c.endpoint,
            binding=RelayBinding(c.server_instance_id, c.remote_team_id),
            credential=credential,
            config=config,
            transport=self._transport,
            sleep=self._sleep,
            clock=self._clock,
            interrupt=self._interrupt,
        )

    def live_client(self, wait: float, margin: float | None = None) -> RelayClient:
        """A client of its own for the live wait's thread (specs/live.md
        §6): its per-attempt deadline and read timeout are the wait plus
        :data:`~syncengine.engine.limits.LIVE_WAIT_MARGIN`, so a relay that holds
        the wait open silently or drips it byte by byte is abandoned."""
        # start-up pin (HTTP_STACK): only this path loads httpx
        import httpx

        # start-up pin (HTTP_STACK): only this path loads h11
        from syncengine.http.client import ClientConfig, RelayClient

        base = self._client_config if self._client_config is not None else ClientConfig()
        bound = wait + (LIVE_WAIT_MARGIN if margin is None else margin)
        config = dataclasses.replace(
            base,
            timeout=httpx.Timeout(connect=10.0, read=bound, write=10.0, pool=10.0),
            request_deadline=bound,
            max_connections=1,
        )
        return self._new_client(RelayClient, config)

    def transport_cursor(self) -> int:
        """The head of the relay's stream this machine holds (one read)."""
        binding = self.store.sync_binding(self.connection.key)
        return 0 if binding is None else binding.transport_cursor

    def delivery_path(self) -> Path:
        """Where ``run`` says how it learns of new messages (``status``)."""
        return Path(f"{self.lock().path}.delivery")

    def _observe(self, caps: Any) -> None:
        """Every authenticated snapshot (capabilities, read-state page) against the newest one seen
        (durably, across processes): the floor and ``current_seq`` of a relay
        never go backwards, and ``current_seq`` is never below what this
        machine pulled. A snapshot that contradicts them halts the operation
        before anything acts on it (issue #14; specs/engine.md §9)."""
        if self._seen is None:
            with read_transaction(self.store.conn, self.store.path) as conn:
                floor, current = st.load_seen(conn, self.connection.binding_pk)
                binding = conn.execute(
                    "SELECT transport_cursor FROM sync_bindings WHERE binding_pk = ?",
                    (self.connection.binding_pk,),
                ).fetchone()
            self._seen = (floor, max(current, int(binding[0]) if binding else 0))
        floor, current = self._seen
        new_floor, new_current = caps.binding.min_available_seq, caps.current_seq
        if new_floor < floor or new_current < current:
            raise RelayRollback(
                f"the relay reports floor {new_floor} and current_seq {new_current}, older than "
                f"the floor {floor} and current_seq {current} this machine already saw"
            )
        self._seen = (new_floor, new_current)

    def history(self) -> SecurityHistory:
        with read_transaction(self.store.conn, self.store.path) as conn:
            return st.load_security_history(conn, self.connection.binding_pk)

    def _load_identity(self, key_id: str) -> object | None:
        """The identity of epoch ``key_id``, read from its file once per
        process, never logged; ``None`` when this machine has none for it."""
        # start-up pin: status loads no syncengine.engine.identity
        from syncengine.engine.identity import read_identity

        if key_id not in self._identities:
            epoch = self.connection.epochs.by_key_id(key_id)
            path = epoch.identity_path if epoch is not None else None
            self._identities[key_id] = (
                None if path is None else read_identity(self.connection, Path(path), key_id)
            )
        return self._identities[key_id]

    def _refresh_epochs(self) -> None:
        """Pick up an epoch another process added or imported (a long ``run``
        must seal to, and judge by, the history as it stands now)."""
        with read_transaction(self.store.conn, self.store.path) as conn:
            epochs = st.load_key_epochs(conn, self.connection.binding_pk)
        if epochs != self.connection.epochs:
            self._adopt_epochs(epochs)

    def _adopt_epochs(self, epochs: EpochHistory) -> None:
        self.connection = replace(self.connection, epochs=epochs)
        self._identities.clear()
        if self._workers is not None:  # they hold the old record
            self._workers.close()
            self._workers = None

    def _offer_workers(self, batch: int) -> Workers | None:
        """Worker processes for ``batch`` age-v1 messages, or ``None`` to work
        in-process (a small batch, no workers allowed, or a failed pool)."""
        if batch < MIN_PARALLEL_BATCH or self._worker_processes < 1:
            return None
        if self._workers is None:
            self._workers = Workers(self.connection, self._worker_processes)
        return self._workers if self._workers.available else None

    def _context(self) -> CycleContext:
        # start-up pin: status loads no syncengine.engine.context
        from syncengine.engine.context import CycleContext

        self._refresh_epochs()
        return CycleContext(
            store=self.store,
            connection=self.connection,
            client=self.client,
            history=self.history,
            identity=self._load_identity,
            progress=self._progress,
            workers=self._offer_workers,
        )

    def _write(self, point: str, action: Callable[[apsw.Connection], T]) -> T:
        """One write transaction, bracketed by the crash points ``point.before_commit``
        and ``point.after_commit`` (syncengine/crash.py)."""
        with write_transaction(self.store.conn, self.store.path, point) as conn:
            return action(conn)

    def _check_not_halted(self) -> None:
        """A durable integrity halt stops every relay operation before any
        request (issue #14): only the operator's :meth:`resume` clears it."""
        with read_transaction(self.store.conn, self.store.path) as conn:
            halt = st.load_halt(conn, self.connection.binding_pk)
        if halt is not None:
            code, message, at = halt
            raise IntegrityHalted(
                f"this binding is halted since {at} ({code}): {message}",
                remediation="Verify the relay (its database, its endpoint) before syncing "
                "again, then run: syncengine resume --team " + self.connection.local_team,
            )

    def resume(self) -> bool:
        """Clear a durable integrity halt (the operator's explicit step);
        returns whether one stood. The next operation checks everything again.

        In the same transaction, every push acknowledgement that a pulled page
        contradicted and no echo confirmed is published again with its exact
        wire ID and envelope (:func:`~syncengine.ops.reconcile_push.repair_contradicted_acks`;
        specs/sync-stage1.md §8.21): without it the durable lie would halt the
        binding on every sync for good. Crash points ``engine.resume.repaired``
        (inside, before the halt clears), then ``engine.resume.*_commit``."""
        # start-up pin: status loads no syncengine.ops.reconcile_push
        from syncengine.ops.reconcile_push import AckRepair, repair_contradicted_acks

        pk = self.connection.binding_pk

        def resume(conn: apsw.Connection) -> tuple[bool, AckRepair | None]:
            if st.load_halt(conn, pk) is None:
                return False, None
            repair = repair_contradicted_acks(conn, pk)
            crash_point("engine.resume.repaired")
            return st.clear_halt(conn, pk), repair

        cleared, repair = self._write("engine.resume", resume)
        self._seen = None  # reloaded: the transport cursor alone bounds the relay now
        if repair is not None and repair.reverted:
            _log.warning(
                "resume: %d acknowledgement(s) the relay contradicted will be sent again "
                "under the same wire IDs (sequences %s); push cursor %d",
                len(repair.reverted),
                ", ".join(str(row.server_seq) for row in repair.reverted),
                repair.push_cursor,
            )
        if cleared:
            _log.info("integrity halt cleared by the operator")
        return cleared

    @contextmanager
    def _recorded(self, *, pulled: bool) -> Iterator[None]:
        """Record the outcome of one operation in ``engine_status`` (one
        transaction). A halted outcome also sets the durable integrity halt."""
        pk = self.connection.binding_pk
        self._check_not_halted()
        try:
            yield
        except StopRequested:
            raise
        except Exception as exc:
            resync = exc if isinstance(exc, ResyncRequired) else None
            if resync is not None:
                from syncengine.engine.resync import resync_command

                resync.remediation = (  # type: ignore[misc]
                    f"{ResyncRequired.remediation} Approve the gap: "
                    + resync_command(
                        self.connection.local_team, resync.min_available_seq, str(self.store.path)
                    )
                )
            failure = classify(exc)
            now = _now()

            def record(conn: apsw.Connection) -> None:
                if resync is not None:
                    st.record_resync(conn, pk, resync.after, resync.min_available_seq, now)
                if failure.state is EngineState.HALTED:
                    st.record_halt(conn, pk, failure.code, failure.message, now)
                st.record_failure(conn, pk, failure, now)

            try:
                self._write("engine.record", record)
            except Exception as secondary:  # keep the original failure visible
                _log.error("could not record the failure: %s", secondary)
            # The caller reports it (the CLI's failure line, the run loop's
            # cycle line); at INFO it stays in configured logs without being
            # printed twice by Python's last-resort handler.
            _log.info("%s: %s", failure.code, failure.message)
            raise
        now = _now()

        seen = self._seen

        def success(conn: apsw.Connection) -> None:
            if pulled:
                st.clear_resync(conn, pk)
            if seen is not None:
                st.record_seen(conn, pk, *seen)
            st.record_success(conn, pk, now)

        self._write("engine.record", success)

    # -- operations ---------------------------------------------------------------------

    def push(self, limit: int = STEADY_PUSH_LIMIT) -> PushReport:
        """Preflight, prepare at most ``limit`` candidates, POST, reconcile."""
        with self._recorded(pulled=False):
            ctx = self._context()
            self._adopt_first(ctx)
            return self._push_step(ctx, limit, drain=False)

    def push_all(self, limit: int = CATCH_UP_PUSH_LIMIT) -> PushReport:
        """Drain the whole backlog in pushes of at most ``limit``, each round
        prepared while the previous one is on the wire (``push --all``)."""
        with self._recorded(pulled=False):
            ctx = self._context()
            self._adopt_first(ctx)
            return self._push_step(ctx, limit, drain=True)

    def _push_step(self, ctx: CycleContext, limit: int, *, drain: bool) -> PushReport:
        """One push of at most ``limit`` candidates, or with ``drain`` the
        whole backlog in such rounds — only its preflight when nothing waits
        for an acknowledgement, where an idle run stops before the push
        pipeline is even imported (specs/engine.md §4.2)."""
        # start-up pin: status loads no syncengine.engine.context
        from syncengine.engine.context import idle_push

        idle = idle_push(ctx, limit)
        if idle is not None:
            return idle
        # start-up pin: status loads no syncengine.engine.cycle
        from syncengine.engine.cycle import drain_push, push_once

        return drain_push(ctx, limit) if drain else push_once(ctx, limit)

    def pull(self, page_limit: int = PULL_PAGE_LIMIT) -> PullReport:
        """Pull and apply every page until the relay has nothing more, then
        take the relay's roster."""
        with self._recorded(pulled=True):
            report = self._pull_pages(self._context(), page_limit)
            self._finish_adoption()
            report.read_state = self._after_pull(report)
            return report

    def _pull_pages(
        self, ctx: CycleContext, page_limit: int, caps: Capabilities | None = None
    ) -> PullReport:
        """The message phase of a pull: the binding and a snapshot (``caps``
        when the caller holds one nothing since can have outdated), then the
        pages — unless the snapshot shows nothing past the cursor, where an
        idle scheduled run stops before the pipeline and its records are
        even imported (specs/engine.md §4.5; issue #17, start-up)."""
        # start-up pin: status loads no syncengine.engine.context
        from syncengine.engine.context import nothing_past, probe_pull

        cursor, caps = probe_pull(ctx, caps)
        if nothing_past(caps, cursor):
            # start-up pin: status loads no syncengine.engine.reports
            from syncengine.engine.reports import PullReport

            return PullReport(transport_cursor=cursor)
        # start-up pin: status loads no syncengine.engine.cycle
        from syncengine.engine.cycle import pull_pages

        return pull_pages(ctx, page_limit, cursor, caps)

    def _adopt_first(self, ctx: Any) -> None:
        """A restored store pulls to the relay's head before it pushes: its own
        messages published after the backup are adopted from the relay, not
        sealed again (syncengine/ops/adopt.py)."""
        if self.store.sync_adopting(self.connection.key):
            self._pull_pages(ctx, PULL_PAGE_LIMIT)
            self._finish_adoption()

    def _finish_adoption(self) -> None:
        if self.store.sync_adopting(self.connection.key):
            self.store.sync_finish_adoption(self.connection.key)
            _log.info("restore: caught up with the relay; local messages not on it will be sent")

    def _after_pull(self, pulled: PullReport | None = None) -> ReadStateReport:
        """The relay's roster adopted, then the read-state phase on the same
        authenticated snapshot (specs/read-state.md §8). ``pulled`` is the
        pull this phase follows: the capability snapshot that pull ended with
        is offered for reuse when it covers the transport cursor it reached."""
        # start-up pin: status loads no syncengine.engine.read_sync
        from syncengine.engine import read_sync

        if not read_sync.supported():
            self.refresh_roster()
            return read_sync.skipped()
        reuse = None
        if pulled is not None and self._client is not None:
            last = self._client.last_capabilities
            if last is not None and last.current_seq >= pulled.transport_cursor:
                reuse = last
        caps, members = read_sync.snapshot_roster(self.client, reuse)
        roster = self._adopt_roster(members)
        return read_sync.read_state_phase(self.store, self.connection, self.client, caps, roster)

    def refresh_roster(self) -> int:
        """Adopt the relay's authenticated roster (``GET /v1/members``) as the
        team's roster, in one transaction; returns how many rows changed.
        Members never come from message names (driver-interface §2 intro)."""
        return len(self._adopt_roster(self.client.members()))

    def _adopt_roster(self, document: Any) -> list[tuple[str, str]]:
        """One transaction (``engine.roster.*``); returns the pairs this store
        now holds on its roster."""
        # start-up pin: status loads no syncengine.engine.roster
        from syncengine.engine.roster import roster_pairs

        # The client hands back the very same immutable document for a
        # byte-identical roster body (specs/read-state.md decision 9), and its
        # pairs are a function of it: computed (and their warnings logged) once.
        cached = self._roster_from
        if cached is not None and cached[0] is document:
            roster = cached[1]
        else:
            roster = roster_pairs(document)
            self._roster_from = (document, roster)
        team = self.connection.local_team
        now = _now()

        def adopt(conn: apsw.Connection) -> set[str]:
            key = teams.team_pk(conn, team)
            teams.adopt_roster(conn, key, roster, now)
            return {
                str(row[0])
                for row in conn.execute(
                    "SELECT member_id FROM members WHERE team_pk = ? AND roster = 1", (key,)
                )
            }

        held = self._write("engine.roster", adopt)
        # A relay member this store could not take (its name is another
        # member's for good) has no local row: its read state is not ours.
        return [(member_id, name) for member_id, name in roster if member_id in held]

    def sync(
        self,
        push_limit: int = STEADY_PUSH_LIMIT,
        page_limit: int = PULL_PAGE_LIMIT,
        *,
        drain: bool = False,
    ) -> SyncReport:
        """Push, then pull. A refused push (policy, 507, oversized) does not
        stop the pull — reads continue — but is still raised afterwards.
        ``drain`` pushes the whole backlog in rounds of ``push_limit`` (the
        one-shot ``sync`` command; ``run`` takes one bounded step per cycle)."""
        with self._recorded(pulled=True):
            ctx = self._context()
            self._adopt_first(ctx)
            push_error: Exception | None = None
            try:
                pushed = self._push_step(ctx, push_limit, drain=drain)
            except StopRequested:
                raise
            except Exception as exc:
                if classify(exc).state not in _PULL_DESPITE_PUSH:
                    raise
                push_error = exc
            reuse = None if push_error is not None else self._unchanged_snapshot(pushed)
            pulled = self._pull_pages(ctx, page_limit, reuse)
            pulled.read_state = self._after_pull(pulled)
            if push_error is not None:
                raise push_error
            return SyncReport(pushed, pulled)

    def _unchanged_snapshot(self, pushed: PushReport) -> Capabilities | None:
        """The push's capability snapshot when that push sent nothing and the
        client has taken no other since: the pull may use it instead of asking
        again (nothing this engine wrote can have moved the relay)."""
        if self._client is None or pushed.batches:
            return None
        last: Capabilities | None = self._client.last_capabilities
        return last

    def reprocess(self, page_limit: int = REPROCESS_PAGE_LIMIT) -> ReprocessReport:
        """Re-evaluate every blocking envelope with today's keys and policy."""
        # start-up pin: status loads no syncengine.engine.cycle
        from syncengine.engine.cycle import reprocess_all

        with self._recorded(pulled=False):
            return reprocess_all(self._context(), page_limit)

    def resync(self, accept_floor: int) -> ResyncReport:
        """Accept the relay's retention gap up to ``accept_floor`` — the
        operator's explicit approval (:mod:`syncengine.engine.resync`) — then
        clear the durable resync-required marker (one more transaction; a
        crash between the two is healed by a rerun, which finds the audit,
        or by the next pull)."""
        # start-up pin: status loads no syncengine.engine.resync
        from syncengine.engine.resync import accept_retention_gap

        self._check_not_halted()
        report = accept_retention_gap(self.store, self.connection, self.client, accept_floor)
        pk = self.connection.binding_pk
        self._write("engine.resync", lambda conn: st.record_resync_accepted(conn, pk))
        audit = report.result.audit
        _log.info(
            "resync.complete: accepted the retention gap %d..%d (%d unavailable)%s",
            audit.gap_start,
            audit.gap_end,
            audit.unavailable,
            " (already applied)" if report.already_applied else "",
        )
        return report

    def quarantine(
        self, *, status: str | None = None, after: int = 0, limit: int = 100
    ) -> tuple[BlockedEnvelope, ...]:
        """Blocked envelopes, oldest first (read-only; no network)."""
        # start-up pin: status loads no syncengine.ops.quarantine
        from syncengine.ops.quarantine import list_blocked

        with read_transaction(self.store.conn, self.store.path) as conn:
            return list_blocked(conn, self.connection.key, status=status, after=after, limit=limit)

    def unblock_read_state(self, member: str) -> str:
        """Clear a member's read-state block (the operator's explicit step,
        read-state-synchronization.md "Limit failure and recovery"); returns
        its member ID. The next cycle succeeds or blocks it again."""
        # start-up pin: status loads no syncengine.ops.read_records
        from syncengine.ops.read_records import SyncReadUnblock

        with read_transaction(self.store.conn, self.store.path) as conn:
            row = conn.execute(
                "SELECT member_id FROM members WHERE team_pk = ? AND name = ? AND roster = 1",
                (teams.team_pk(conn, self.connection.local_team), member),
            ).fetchone()
        if row is None:
            raise ConfigurationError(
                f"team {self.connection.local_team!r} has no roster member named {member!r}",
                remediation="Name a member as 'syncengine status' lists it under read_state.",
            )
        member_id = str(row[0])
        self.store.sync_unblock_read_state(self.connection.key, SyncReadUnblock(member_id))
        _log.info("read-state.unblocked: member %s", member_id)
        return member_id

    def status(self) -> EngineStatus:
        """The operator's view, from one snapshot; no network."""
        c = self.connection
        with read_transaction(self.store.conn, self.store.path) as conn:
            # start-up pin: idle pull loads no syncengine.ops.status
            from syncengine.ops.status import sync_status

            sync = sync_status(conn, c.key)
            pending = st.pending_push_count(conn, sync.binding) if sync.binding else 0
            return EngineStatus(
                connection=c,
                history=st.load_security_history(conn, c.binding_pk),
                sync=sync,
                pending_push=pending,
                engine=st.load_status(conn, c.binding_pk),
                lock_path=self.lock().path,
                store_path=self.store.path,
                warnings=tuple(store_exposure(self.store.path)),
            )

    def set_security_mode(self, mode: SecurityMode) -> SecurityEntry:
        """Append ``mode`` at a fresh snapshot's ``next_sequence_boundary``
        (v1.md: prospective; earlier messages keep their earlier policy)."""
        caps = self.client.capabilities()
        pk = self.connection.binding_pk

        def append(conn: apsw.Connection) -> SecurityEntry:
            history = st.load_security_history(conn, pk).appended(mode, caps.next_sequence_boundary)
            st.append_security_entry(conn, pk, history.current, _now())
            return history.current

        return self._write("engine.security", append)

    def add_epoch(
        self, key_id: str, recipients_file: str, identity_file: str | None = None
    ) -> KeyEpoch:
        """Schedule a rotation to a new epoch at the relay's next sequence
        boundary (specs/engine.md §6.2; profile "Multi-writer cutover
        protocol", this machine's steps): everything is validated before the
        capability request, the drain is re-checked inside the one
        transaction (crash point ``engine.epoch``). The caller holds the
        engine lock, so no push of this store seals in between."""
        # start-up pin: status loads no syncengine.engine.epoch_ops
        from syncengine.engine import epoch_ops

        self._refresh_epochs()
        c = self.connection
        recipients = epoch_ops.read_recipients(key_id, recipients_file)
        current = c.epochs.current
        if current is None:
            raise ConfigurationError(
                f"team {c.local_team!r} has no age-v1 epoch to rotate from",
                remediation="Connect it with --key-id and --recipients-file.",
            )
        if current.key_id == key_id and current.recipients == recipients:
            # A rerun after a crash past the commit (or a repeated command):
            # the rotation is already there; nothing is appended twice.
            return current
        draft = c.epochs.appended(key_id, recipients, current.effective_from_seq)
        candidate = EpochHistory((*c.epochs.epochs, draft))
        if identity_file is not None:
            identity_path = (
                epoch_ops.assign_identity(candidate, identity_file, only=key_id)
                .epochs[-1]
                .identity_path
            )
        else:
            identity_path = epoch_ops.inherited_identity(c.epochs, candidate, key_id)
        with read_transaction(self.store.conn, self.store.path) as conn:
            epoch_ops.refuse_while_draining(conn, c.binding_pk, key_id)  # before any request
        caps = self.client.capabilities()
        history = self._write(
            "engine.epoch",
            lambda conn: epoch_ops.rotate(
                conn,
                c.binding_pk,
                key_id,
                recipients,
                caps.next_sequence_boundary,
                identity_path,
                _now(),
            ),
        )
        self._adopt_epochs(history)
        added = history.epochs[-1]
        _log.info(
            "epoch.added: %s from sequence %d (%d recipients)",
            added.key_id,
            added.effective_from_seq,
            len(added.recipients),
        )
        return added

    def import_epochs(self, snapshot_file: str, confirm_digest: str | None) -> tuple[KeyEpoch, ...]:
        """Append the epochs a confirmed snapshot adds (crash point
        ``engine.epoch_import``); this machine's identities that are
        recipients of a new epoch are installed on it."""
        # start-up pin: status loads no syncengine.engine.epoch_ops
        from syncengine.engine import epoch_ops

        self._refresh_epochs()
        c = self.connection
        snapshot = epoch_ops.read_snapshot(snapshot_file, confirm_digest)
        if (snapshot.server_instance_id, snapshot.team_id) != (
            c.server_instance_id,
            c.remote_team_id,
        ):
            raise ConfigurationError(
                f"the epoch snapshot belongs to team {snapshot.team_id} on relay instance "
                f"{snapshot.server_instance_id}, not to team {c.local_team!r}'s binding"
            )
        candidate = EpochHistory(snapshot.epochs)
        with read_transaction(self.store.conn, self.store.path) as conn:
            new = epoch_ops.snapshot_adds(conn, c.binding_pk, snapshot)  # the checkpoint rule
        identities = {
            e.key_id: path
            for e in new
            if (path := epoch_ops.inherited_identity(c.epochs, candidate, e.key_id))
        }
        history, added = self._write(
            "engine.epoch_import",
            lambda conn: epoch_ops.import_epochs(conn, c.binding_pk, snapshot, identities, _now()),
        )
        self._adopt_epochs(history)
        return added

    def epoch_snapshot(self) -> EpochSnapshot:
        """The team-shared epoch and security histories, for another machine:
        the retained checkpoint's snapshot, or its successor when the
        security history changed since (crash point ``engine.checkpoint``)."""
        # start-up pin: status loads no syncengine.engine.epoch_ops
        from syncengine.engine.epoch_ops import issue_snapshot

        self._refresh_epochs()
        c = self.connection
        return self._write(
            "engine.checkpoint",
            lambda conn: issue_snapshot(
                conn, c.binding_pk, c.server_instance_id, c.remote_team_id, _now()
            ),
        )

    def set_identity(
        self, identity_file: str | os.PathLike[str], key_id: str | None = None
    ) -> tuple[str, ...]:
        """Install an identity (by path) on every epoch whose manifest holds
        its recipient, or only on epoch ``key_id``; returns those key IDs.

        The file is read now to prove it holds an identity whose recipient is
        in the manifest; only then is its path stored (crash point
        ``engine.identity``). Run :meth:`reprocess` afterwards to import
        ``pending_key`` messages.
        """
        # start-up pin: status loads no syncengine.engine.epoch_ops
        from syncengine.engine.epoch_ops import assign_identity

        c = self.connection
        if not c.epochs.configured:
            raise ConfigurationError(
                "this team has no age-v1 epoch configured; an identity has nothing to open"
            )
        if key_id is not None and c.epochs.by_key_id(key_id) is None:
            raise ConfigurationError(f"team {c.local_team!r} has no epoch {key_id!r}")
        path = str(Path(identity_file).absolute())
        updated = assign_identity(c.epochs, path, only=key_id)
        changed = tuple(
            e.key_id
            for e in updated.epochs
            if e.identity_path == path and key_id in (None, e.key_id)
        )

        def install(conn: apsw.Connection) -> None:
            for epoch in updated.epochs:
                if epoch.key_id in changed:
                    assert epoch.identity_path is not None
                    st.set_identity_path(conn, c.binding_pk, epoch.key_id, epoch.identity_path)

        self._write("engine.identity", install)
        self._adopt_epochs(updated)
        return changed
