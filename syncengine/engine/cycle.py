"""One sync cycle's steps against the relay and the store (specs/engine.md §4).

The steps, each a function of a :class:`CycleContext`:

- :func:`push_once` — capabilities → effective write set
  (:func:`~syncengine.engine.security.plan_write`) → ``prepare_push`` →
  POST in batches (:mod:`~syncengine.engine.batching`), halving a batch the
  relay answers with 413 → ``reconcile_push`` after *every* successful POST,
  so acknowledgements already received are durable before a later batch's
  failure surfaces (upstream ``push.partial``); an answer whose sequences
  the relay's own snapshots contradict is refused whole first
  (:func:`check_ack_sequences`, specs/sync-stage1.md §8.20);
- :func:`pull_all` — GET pages from the transport cursor until ``has_more``
  is false; every envelope is evaluated (policy at its ``server_seq``,
  epoch, open) into a ``sync_pull_message`` and each page is applied in one
  transaction before the next is fetched, so memory is one page whatever
  the backlog; capabilities are refreshed when a page passes the snapshot's
  ``current_seq`` (a newer policy may govern it);
- :func:`reprocess_all` — walk every page of durable blocking envelopes
  until ``has_more`` is false, re-evaluate with today's keys and policy,
  and apply the outcomes without moving the transport cursor.

Nothing here moves a cursor except through the Stage-1 operations, and a
410 propagates unchanged: the engine never resets the cursor itself.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from syncengine.engine.batching import plan_batches
from syncengine.engine.context import CycleContext, nothing_past, probe_pull, write_plan
from syncengine.engine.errors import PushOversized
from syncengine.engine.evaluation import start_evaluation
from syncengine.engine.progress import Progress
from syncengine.engine.reports import PullReport, PushReport, ReprocessReport
from syncengine.engine.reprocess_walk import ReprocessWalk
from syncengine.engine.security import WritePlan
from syncengine.engine.state import ConnectionRecord, pending_push_count
from syncengine.http.errors import AckContradiction, RequestTooLarge
from syncengine.ops.quarantine import count_blocked
from syncengine.ops.sync_records import (
    SyncPrepare,
    SyncPullCursor,
    SyncPullMessage,
    SyncPushAck,
    SyncPushCandidate,
)
from syncengine.store.connection import read_transaction
from wire.http_v1.capabilities import Capabilities
from wire.http_v1.messages import (
    Disposition,
    MessageBatch,
    MessagePage,
    OutgoingMessage,
    PushAck,
    PushResponse,
)
from wire.limits import ENVELOPE_VERSION

__all__ = [
    "AckBound",
    "CycleContext",
    "Overlap",
    "PullReport",
    "PushReport",
    "ReprocessReport",
    "check_ack_sequences",
    "drain_push",
    "pull_all",
    "pull_pages",
    "push_once",
    "reprocess_all",
    "send_batches",
]

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

    import apsw

    from syncengine.http.client import EncodedBatch
    from syncengine.ops.bindings import SyncBinding
    from syncengine.ops.prepare_push import PrepareResult

_log = logging.getLogger("syncengine.engine")
A = TypeVar("A")
R = TypeVar("R")


# -- push ---------------------------------------------------------------------------


def _prepare_request(plan: WritePlan, caps: Capabilities, conn: ConnectionRecord) -> SyncPrepare:
    if plan.cipher == "age-v1":
        # The epoch effective at the prospective boundary (profile "Recipient-
        # set epochs": a writer selects the key_id effective there).
        assert plan.boundary is not None
        epoch = conn.epochs.at(plan.boundary)
        assert epoch is not None
        return SyncPrepare(
            ENVELOPE_VERSION,
            "age-v1",
            epoch.key_id,
            epoch.recipients,
            caps.max_blob_bytes,
            True,
        )
    # ``none`` — or nothing new at all, in which case only published
    # reservations are re-emitted (their envelopes are immutable anyway).
    return SyncPrepare(ENVELOPE_VERSION, "none", None, (), caps.max_blob_bytes, plan.allow_new)


@dataclass
class _SendTally:
    batches: int = 0
    splits: int = 0
    stored: int = 0
    duplicate: int = 0
    push_cursor: int = 0

    def add(self, other: _SendTally) -> None:
        self.batches += other.batches
        self.splits += other.splits
        self.stored += other.stored
        self.duplicate += other.duplicate
        self.push_cursor = other.push_cursor


class Overlap:
    """Runs every relay call of a round on ``pool``'s one worker thread, and
    ``work`` on the calling thread while the first of them is on the wire;
    ``follow`` (the next round's preflight) is queued right behind that first
    call.

    Only relay calls move to the worker, all of them, so the client is never
    used from two threads (a preflight queued on the same pool included);
    every store transaction stays on the engine's thread and connection. A
    call's result (or error) is always waited for, even when ``work`` fails,
    so acknowledgements the relay gave are recorded; ``work``'s failure is
    kept for :meth:`reraise`.
    """

    def __init__(
        self,
        pool: Executor,
        work: Callable[[], None],
        follow: Callable[[], Capabilities] | None = None,
    ) -> None:
        self._pool = pool
        self._work: Callable[[], None] | None = work
        self._failure: BaseException | None = None
        self._follow = follow
        #: ``follow``'s call, queued on the relay thread right behind the first
        #: request (``None`` until then): the next round's preflight.
        self.followed: Future[Capabilities] | None = None

    def around(self, call: Callable[[A], R], argument: A) -> R:
        future = self._pool.submit(call, argument)
        follow, self._follow = self._follow, None
        if follow is not None:
            # Behind the POST on the one relay thread, so the relay answers it
            # while this thread parses and reconciles the POST's answer.
            self.followed = self._pool.submit(follow)
        work, self._work = self._work, None
        if work is not None:
            try:
                work()
            except BaseException as exc:  # surfaced by reraise(), after the POST
                self._failure = exc
        try:
            return future.result()
        except BaseException:
            if self._failure is not None:
                _log.error("overlapped work failed too: %s", self._failure)
            raise

    def call(self, call: Callable[[], R]) -> R:
        """One more relay call on the worker thread (a fresh snapshot)."""
        return self._pool.submit(call).result()

    def reraise(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure


@dataclass
class AckBound:
    """The newest ``current_seq`` an authenticated snapshot reported during
    one push round: the preflight's, raised by any fresh snapshot taken to
    check an answer. Acknowledgements never raise it — they are what is
    being checked."""

    current_seq: int


def check_ack_sequences(acks: Sequence[PushAck], bound: AckBound, fresh: Callable[[], int]) -> None:
    """Refuse an answer the relay's own snapshots contradict (pure but for
    ``fresh``, which fetches a new snapshot's ``current_seq``; specs/sync-stage1.md
    §8.20, issue #14).

    Sequences only grow, and the preflight snapshot was taken before the
    POST, so:

    - a ``stored`` (new) id takes a sequence above the preflight's
      ``current_seq``; one at or below it names a sequence the relay had
      already allocated — refused without another request;
    - a ``duplicate`` above the preflight's ``current_seq`` is genuine only
      when an earlier attempt of this very batch was stored and its answer
      lost. That is rare, so only then is a fresh snapshot fetched; a
      ``duplicate`` beyond *its* ``current_seq`` names a sequence the relay
      does not hold, and the whole answer is refused before anything is
      recorded (a lie taken as the mapping would halt the binding on the
      genuine page later). The fresh snapshot goes through the rollback
      check like every other: a relay inflating ``current_seq`` to cover
      the lie halts at its next honest snapshot.

    Raises :class:`AckContradiction` (halted); the normal path costs nothing.
    """
    for ack in acks:
        if ack.disposition is Disposition.STORED and ack.server_seq <= bound.current_seq:
            raise AckContradiction(
                f"the relay acknowledged wire ID {ack.id} as newly stored at server_seq "
                f"{ack.server_seq}, but its snapshot before the push already held sequences "
                f"up to {bound.current_seq}; nothing of the answer was recorded"
            )
    beyond = max(
        (a.server_seq for a in acks if a.disposition is Disposition.DUPLICATE),
        default=0,
    )
    if beyond <= bound.current_seq:
        return
    bound.current_seq = max(bound.current_seq, fresh())
    if beyond > bound.current_seq:
        raise AckContradiction(
            f"the relay acknowledged a duplicate at server_seq {beyond}, beyond its own "
            f"current_seq {bound.current_seq}; nothing of the answer was recorded"
        )


#: One POST batch and, when it was encoded ahead, its request bytes.
PlannedBatch = tuple[list[SyncPushCandidate], "EncodedBatch | None"]


def encode_ahead(ctx: CycleContext, candidates: Sequence[SyncPushCandidate]) -> list[PlannedBatch]:
    """The batches :func:`send_batches` will POST, each encoded now (pure but
    for the client's encoder).

    The drain encodes round *r + 1* while round *r*'s POST is on the wire, so
    the engine's thread has only the answer to parse and reconcile between
    two POSTs. A batch that does not encode (over the request limit, say)
    is left unencoded: :func:`send_batches` encodes it again in its turn and
    meets the same error at the same point as an unplanned send.
    """
    planned: list[PlannedBatch] = []
    for batch in plan_batches(candidates):
        try:
            planned.append((batch, ctx.client.encode_batch(_message_batch(batch))))
        except Exception:  # surfaced, identically, when the batch is sent
            planned.append((batch, None))
    return planned


def _message_batch(batch: Sequence[SyncPushCandidate]) -> MessageBatch:
    return MessageBatch(tuple(OutgoingMessage(c.wire_id, c.envelope) for c in batch))


def send_batches(
    ctx: CycleContext,
    candidates: Sequence[SyncPushCandidate],
    progress: Progress,
    bound: AckBound,
    overlap: Overlap | None = None,
    planned: Sequence[PlannedBatch] | None = None,
) -> _SendTally:
    """POST every candidate, reconciling after each acknowledged batch.

    A 413 halves the batch (the halves keep their exact durable IDs and
    envelopes); a single message that is still too large is
    :class:`PushOversized`. Any other failure surfaces after the earlier
    batches' acknowledgements were recorded. Every answer is first checked
    against ``bound`` (the preflight snapshot's ``current_seq``) by
    :func:`check_ack_sequences`.

    With ``overlap``, every POST runs on the overlap's worker thread and its
    ``work`` runs here during the first; acknowledgements are recorded
    before a failure of ``work`` surfaces. ``planned`` is
    :func:`encode_ahead` of these very ``candidates`` (the batches and their
    bytes are what this call would build itself).
    """
    tally = _SendTally()

    def post(
        batch: Sequence[SyncPushCandidate],
        overlap: Overlap | None,
        encoded: EncodedBatch | None = None,
    ) -> PushResponse:
        if encoded is None:
            encoded = ctx.client.encode_batch(_message_batch(batch))
        if overlap is None:
            return ctx.client.send_batch(encoded)()
        # Only the request leaves this thread: encoding and parsing hold the
        # GIL, and beside the store's SQLite calls (which release it) they
        # would make each of those wait to get it back.
        return overlap.around(ctx.client.send_batch, encoded)()

    def send(
        batch: Sequence[SyncPushCandidate],
        overlap: Overlap | None,
        encoded: EncodedBatch | None = None,
    ) -> None:
        try:
            response = post(batch, overlap, encoded)
        except RequestTooLarge:
            if len(batch) == 1:
                raise PushOversized(
                    f"the relay refuses local message {batch[0].local_id} even alone "
                    f"(wire ID {batch[0].wire_id}, {len(batch[0].envelope.blob)} blob chars)"
                ) from None
            tally.splits += 1
            middle = len(batch) // 2
            _log.info("push.split %d -> %d + %d", len(batch), middle, len(batch) - middle)
            send(batch[:middle], overlap)
            send(batch[middle:], overlap)
            return

        def fresh() -> int:
            caps = (
                ctx.client.capabilities()
                if overlap is None
                else overlap.call(ctx.client.capabilities)
            )
            return caps.current_seq

        check_ack_sequences(response.acks, bound, fresh)
        _reconcile(ctx, batch, response, tally)
        progress.add(len(batch))

    if planned is None:
        planned = [(batch, None) for batch in plan_batches(candidates)]
    for batch, encoded in planned:
        send(batch, overlap, encoded)
    if overlap is not None:
        overlap.reraise()
    return tally


def _reconcile(
    ctx: CycleContext,
    batch: Sequence[SyncPushCandidate],
    response: PushResponse,
    tally: _SendTally,
) -> None:
    acks = [
        SyncPushAck(c.local_position, ack.id, ack.server_seq, ack.disposition.value)
        for c, ack in zip(batch, response.acks, strict=True)
    ]
    result = ctx.store.sync_reconcile_push(ctx.key, acks)
    tally.batches += 1
    tally.stored += sum(1 for a in acks if a.disposition == "stored")
    tally.duplicate += sum(1 for a in acks if a.disposition == "duplicate")
    tally.push_cursor = result.push_cursor
    _log.info("push.reconciled %d acks, push cursor %d", len(acks), result.push_cursor)


def _pending(ctx: CycleContext) -> int | None:
    """Messages a drain will send (for the progress line)."""
    return _count(ctx, pending_push_count)


def _blocked(ctx: CycleContext) -> int | None:
    """Envelopes a reprocess will look at (for the progress line)."""
    return _count(ctx, lambda conn, binding: count_blocked(conn, binding.pk))


def _count(ctx: CycleContext, count: Callable[[apsw.Connection, SyncBinding], int]) -> int | None:
    """One read-only count for a progress total (``None`` before any binding)."""
    binding = ctx.store.sync_binding(ctx.key)
    if binding is None:
        return None
    with read_transaction(ctx.store.conn, ctx.store.path) as conn:
        return count(conn, binding)


def _plan(ctx: CycleContext, caps: Capabilities) -> tuple[WritePlan, SyncPrepare]:
    """Capabilities preflight → effective write set → the prepare request."""
    plan = write_plan(ctx, caps)
    return plan, _prepare_request(plan, caps, ctx.connection)


def _report(
    limit: int, plan: WritePlan, candidates: int, blocked: int, tally: _SendTally
) -> PushReport:
    return PushReport(
        limit=limit,
        cipher=plan.cipher,
        blocked_reason=plan.reason,
        candidates=candidates,
        batches=tally.batches,
        splits=tally.splits,
        stored=tally.stored,
        duplicate=tally.duplicate,
        sealed_blocked=blocked,
        push_cursor=tally.push_cursor,
    )


def _push_cursor(ctx: CycleContext) -> int:
    binding = ctx.store.sync_binding(ctx.key)
    return binding.push_cursor if binding is not None else 0


def push_once(ctx: CycleContext, limit: int) -> PushReport:
    """One push: preflight, prepare at most ``limit`` candidates, send, reconcile."""
    caps = ctx.client.capabilities()
    plan, request = _plan(ctx, caps)
    prepared = ctx.store.sync_prepare_push(ctx.key, request, limit, seal_all=ctx.seal_all)
    candidates = prepared.candidates
    progress = ctx.progress("push")
    bound = AckBound(caps.current_seq)
    tally = send_batches(ctx, candidates, progress, bound) if candidates else _SendTally()
    progress.done()
    if not candidates:
        tally.push_cursor = _push_cursor(ctx)
    return _report(limit, plan, len(candidates), len(prepared.blocked), tally)


def drain_push(ctx: CycleContext, limit: int) -> PushReport:
    """Push rounds of at most ``limit`` candidates until a round is not full.

    Every round is a whole push — preflight, prepare, POST, reconcile — but
    round *r + 1* is prepared (sealed and published) while round *r*'s last
    POST is on the wire, so sealing and storing overlap the relay's work
    instead of waiting for it (specs/engine.md §4.3). This
    keeps every rule of a single push:

    - round *r + 1* prepares after round *r*'s last local position, so the
      reservations in flight are not emitted twice; they are durable and
      unacknowledged until reconciled, so a crash anywhere re-emits them;
    - POSTs stay one at a time and in position order, and each batch is
      reconciled before the next is sent, so the push cursor advances as in
      a serial push;
    - round *r + 1* uses the write set read at round *r*'s preflight, one
      round trip old — the same window a single push has between its
      preflight and its POST; round *r + 1*'s preflight is fetched on the
      relay thread right behind round *r*'s first POST, so the relay
      answers it while this thread reconciles (it is still a snapshot taken
      before any POST of round *r + 1*, which is all its ``AckBound`` needs);
    - round *r + 1*'s batches are encoded during round *r*'s POST too
      (:func:`encode_ahead`), so between two POSTs this thread only parses,
      checks and reconciles an answer.
    """
    total = _SendTally()
    candidates_seen = blocked_seen = 0
    progress = ctx.progress("push")
    with ThreadPoolExecutor(1, thread_name_prefix="syncengine-post") as pool:
        # The first preflight is on the wire (on the relay thread, like every
        # relay call of the drain) while this thread counts the progress total
        # and loads the prepare step, which the preflight's answer waits for.
        first = pool.submit(ctx.client.capabilities)
        progress.total = _pending(ctx)
        import syncengine.ops.prepare_push  # noqa: F401

        caps = first.result()
        plan, request = _plan(ctx, caps)
        prepared = ctx.store.sync_prepare_push(ctx.key, request, limit, seal_all=ctx.seal_all)
        planned: list[PlannedBatch] | None = None
        while True:
            candidates = prepared.candidates
            candidates_seen += len(candidates)
            blocked_seen += len(prepared.blocked)
            if not candidates:
                total.push_cursor = _push_cursor(ctx)
                break
            nxt: list[tuple[PrepareResult, list[PlannedBatch]]] = []
            if len(candidates) >= limit:
                after = candidates[-1].local_position

                def prepare_next(
                    request: SyncPrepare = request,
                    after: int = after,
                    nxt: list[tuple[PrepareResult, list[PlannedBatch]]] = nxt,
                ) -> None:
                    ready = ctx.store.sync_prepare_push(
                        ctx.key, request, limit, after, seal_all=ctx.seal_all
                    )
                    nxt.append((ready, encode_ahead(ctx, ready.candidates)))
                    # Loaded while the first POST is still on the wire, not
                    # after its answer (later rounds: a lookup in sys.modules).
                    import syncengine.ops.reconcile_push  # noqa: F401

                overlap = Overlap(pool, prepare_next, follow=ctx.client.capabilities)
                tally = send_batches(
                    ctx, candidates, progress, AckBound(caps.current_seq), overlap, planned
                )
                preflight = overlap.followed
            else:
                preflight = None
                tally = send_batches(
                    ctx, candidates, progress, AckBound(caps.current_seq), planned=planned
                )
            total.add(tally)
            if not nxt or preflight is None:
                break
            caps = preflight.result()
            plan, request = _plan(ctx, caps)
            prepared, planned = nxt[0]
    progress.done()
    return _report(limit, plan, candidates_seen, blocked_seen, total)


# -- pull ---------------------------------------------------------------------------


def pull_all(ctx: CycleContext, page_limit: int, caps: Capabilities | None = None) -> PullReport:
    """Pull from the transport cursor until the relay has nothing more.

    ``caps`` is a capability snapshot the caller fetched moments ago with
    nothing written to the relay since (a sync whose push posted nothing);
    without it the pull takes its own (:func:`~syncengine.engine.context.probe_pull`,
    after the binding). When the snapshot shows nothing past the cursor
    (:func:`~syncengine.engine.context.nothing_past`) no page is requested;
    otherwise :func:`pull_pages` fetches and applies them.
    """
    cursor, caps = probe_pull(ctx, caps)
    if nothing_past(caps, cursor):
        return PullReport(transport_cursor=cursor)
    return pull_pages(ctx, page_limit, cursor, caps)


def pull_pages(ctx: CycleContext, page_limit: int, cursor: int, caps: Capabilities) -> PullReport:
    """Every page from the transport cursor ``cursor`` under the snapshot
    ``caps`` — both as :func:`~syncengine.engine.context.probe_pull` returned
    them — until the relay has nothing more.

    A pipeline of three stages (specs/engine.md §4.6): the next page is
    requested on a thread as soon as the current one has arrived; the
    current page's envelopes are opened (on worker processes for a large
    age-v1 page, see :mod:`~syncengine.engine.workers`) while the page
    before it is applied here. The relay's work, the transfer, the crypto
    and the store overlap. It stays within the page rules: a GET is a read,
    the cursor moves only through ``apply_pull`` page by page in order, at
    most three pages are in memory, and an error of a later request (a 410
    included) surfaces only after every page before it was applied. Every
    relay call runs on the one thread, so the client is never used from two
    threads at once.
    """
    report = PullReport(transport_cursor=cursor)
    history = ctx.history()
    outcomes: Counter[str] = Counter()
    progress = ctx.progress("pull")
    client = ctx.client

    def apply(page: MessagePage, finish: Callable[[], list[SyncPullMessage]]) -> int:
        evaluated = finish()
        if not evaluated:
            return cursor
        applied = ctx.store.sync_apply_pull(ctx.key, evaluated, SyncPullCursor(page.next_after))
        outcomes.update(o.status for o in applied.outcomes)
        report.received += len(evaluated)
        progress.add(len(evaluated))
        return applied.result.transport_cursor

    with ThreadPoolExecutor(1, thread_name_prefix="syncengine-get") as pool:
        # An estimate for the progress line: retention or gaps make it high.
        progress.total = max(0, caps.current_seq - max(cursor, caps.binding.min_available_seq))
        ahead = pool.submit(client.fetch_messages, cursor, page_limit)
        pending: tuple[MessagePage, Callable[[], list[SyncPullMessage]]] | None = None
        while True:
            try:
                page = ahead.result()()  # fetched there, parsed here
                if page.has_more:
                    ahead = pool.submit(client.fetch_messages, page.next_after, page_limit)
                report.pages += 1
                if page.messages and page.messages[-1].server_seq > caps.current_seq:
                    caps = pool.submit(client.capabilities).result()
                    report.capability_refreshes += 1
                started = start_evaluation(
                    [(m.server_seq, m.id, m.server_received_at, m.envelope) for m in page.messages],
                    caps=caps,
                    history=history,
                    connection=ctx.connection,
                    identity=ctx.identity,
                    workers=ctx.workers,
                )
            except Exception:
                if pending is not None:  # every page before the failure still lands
                    cursor = apply(*pending)
                raise
            if pending is not None:
                cursor = apply(*pending)
            pending = (page, started)
            if not page.has_more:
                break
        cursor = apply(*pending)
    progress.done()
    report.outcomes = dict(sorted(outcomes.items()))
    report.transport_cursor = cursor
    return report


# -- reprocess ----------------------------------------------------------------------


def reprocess_all(ctx: CycleContext, page_limit: int) -> ReprocessReport:
    """Re-evaluate every durable blocking envelope, page by page, each page
    checked before it is applied (syncengine/engine/reprocess_walk.py)."""
    caps = ctx.client.capabilities()
    history = ctx.history()
    report = ReprocessReport()
    outcomes: Counter[str] = Counter()
    page_after: str | None = None
    progress = ctx.progress("reprocess")
    progress.total = _blocked(ctx)
    walk = ReprocessWalk(page_limit, caps.current_seq)
    while True:
        page = ctx.store.sync_reprocess(ctx.key, page_limit, page_after)
        walk.accept(page)  # checked before anything of it is applied (#34)
        report.pages += 1
        if page.candidates:
            evaluated = start_evaluation(
                [
                    (c.server_seq, c.wire_id, c.server_received_at, c.envelope)
                    for c in page.candidates
                ],
                caps=caps,
                history=history,
                connection=ctx.connection,
                identity=ctx.identity,
                workers=ctx.workers,
            )()
            # The cursor stays where it is: reprocess never moves transport.
            applied = ctx.store.sync_apply_pull(
                ctx.key, evaluated, SyncPullCursor(page.state.transport_cursor)
            )
            outcomes.update(o.status for o in applied.outcomes)
            report.candidates += len(evaluated)
            progress.add(len(evaluated))
        if not page.page.has_more:
            break
        page_after = walk.next_after
    progress.done()
    report.outcomes = dict(sorted(outcomes.items()))
    return report
