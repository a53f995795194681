"""The host's side of the driver ABI, written here from what the agmsg host
does (its `storage-sync-driver.sh` adapter and its `remote-sync.mjs` engine
at the bearer-credential generation; UPSTREAM-RECORDS §1, §2, §5), so our
bash driver is tested against what a host *requires* of each record stream,
not against what our own engine happens to tolerate.

What is reproduced, rule by rule (each raises :class:`HostFatal` with the
host's own wording where it has one):

* the adapter: ``bash <adapter> <verb> <local-team> <server-instance-id>
  <remote-team-id> 1 [extra…]`` sources the storage driver, refuses a verb
  whose ``storage_sync_*`` function is missing (exit 14), maps
  ``capabilities`` to ``storage_describe`` called with no arguments and keeps
  only its ``capabilities=`` line;
* every non-zero exit of a verb is fatal to the cycle (exit 11 aside, which
  the newest host retries; nothing here is busy);
* stdout is parsed leniently but every non-empty line must be JSON: a
  trailing status word (``ok``) is fatal;
* ``prepare`` must yield a ``sync_state`` whose ``transport_cursor`` is a
  canonical sequence; the pull starts there;
* ``read-prepare`` answers are checked as the host's
  ``readStateUpdateBatches`` checks them: every record's member is in the
  context, one frontier or one block per member, no frontier or exact for
  a blocked member, no duplicate exact, canonical sequences, and **every
  unblocked member of the context has its frontier** ("driver omitted a
  member read frontier");
* a ``reprocess`` page is checked as ``validateReprocessDriverPage``: one
  ``sync_state``, one final page record with exactly its keys, at most
  ``limit`` candidates in strictly increasing ``(server_seq, id)`` order,
  ``next_after`` equal to the last candidate's key exactly when
  ``has_more``, and a state that does not change between pages.

HTTP goes to a real relay with the host's headers (protocol version, team,
bearer credential); message bodies are sealed and opened with the ``none``
profile, as the host's cipher helper does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from wire.envelope import Envelope
from wire.outcome import Importable
from wire.profiles import open_envelope

SEQ = re.compile(r"^(0|[1-9][0-9]*)$")
MAX_SEQ = 9223372036854775807
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

#: The adapter's verb table (storage-sync-driver.sh).
FUNCTIONS = {
    "prepare": "storage_sync_prepare_push",
    "reconcile": "storage_sync_reconcile_push",
    "apply": "storage_sync_apply_pull",
    "reprocess": "storage_sync_reprocess",
    "resync-status": "storage_sync_resync_status",
    "resync": "storage_sync_resync",
    "read-prepare": "storage_sync_prepare_read_state",
    "read-apply": "storage_sync_apply_read_state",
    "read-block": "storage_sync_block_read_state",
    "read-unblock": "storage_sync_unblock_read_state",
}

#: The bash the adapter runs: source the driver, refuse a missing function
#: with 14, else call it with the rest of argv (stdin passes through).
_ADAPTER = """
source "$DRIVER_FILE" || exit 10
fn="$1"; shift
command -v "$fn" >/dev/null 2>&1 || exit 14
"$fn" "$@"
"""


class HostFatal(AssertionError):
    """What ends a host engine's cycle (it exits 1 with this message)."""


def _seq(value: Any, what: str) -> int:
    if not isinstance(value, str) or not SEQ.match(value) or int(value) > MAX_SEQ:
        raise HostFatal(f"{what} is not a canonical sequence: {value!r}")
    return int(value)


def _lenient_jsonl(stdout: bytes, verb: str) -> list[dict[str, Any]]:
    records = []
    for line in re.split(r"\r?\n", stdout.decode("utf-8")):
        if not line:
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise HostFatal(f"storage sync {verb} printed a non-JSON line: {line!r}") from None
    return records


@dataclass
class HostMachine:
    """One machine of the host: its store (through our sourced driver file),
    its local team name and the remote binding it syncs."""

    driver_file: Path
    store: Path
    team: str
    server_instance_id: str
    remote_team_id: str
    calls: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        # The host strips secrets from the child and adds nothing of ours:
        # the store comes from the environment a user set for the driver.
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "SYNCENGINE_STORE": str(self.store),
            "SYNCENGINE_DRIVER_SERVER": "0",
            "DRIVER_FILE": str(self.driver_file),
        }

    def call(
        self, function: str, *args: str, stdin: bytes = b""
    ) -> subprocess.CompletedProcess[bytes]:
        """One storage function, in a fresh bash that sourced the driver."""
        return subprocess.run(
            ["bash", "--norc", "-c", _ADAPTER, "adapter", function, *args],
            input=stdin,
            capture_output=True,
            env=self.env(),
            timeout=120,
            check=False,
        )

    def storage(self, function: str, *args: str, stdin: bytes = b"") -> str:
        """A storage-contract call (send, list_unread, …): its stdout."""
        done = self.call(function, *args, stdin=stdin)
        if done.returncode != 0:
            raise HostFatal(f"{function} exited {done.returncode}: {done.stderr.decode()}")
        return done.stdout.decode()

    def capabilities(self) -> list[str]:
        done = self.call("storage_describe")
        lines = [x for x in done.stdout.decode().splitlines() if x.startswith("capabilities=")]
        return [c for line in lines for c in line.split("=", 1)[1].split(",") if c]

    def verb(
        self, verb: str, *extra: str, records: Sequence[dict[str, Any]] = ()
    ) -> list[dict[str, Any]]:
        """``bash <adapter> <verb> <binding…> [extra…]`` with JSONL on stdin."""
        self.calls.append(verb)
        stdin = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        binding = (self.team, self.server_instance_id, self.remote_team_id, "1")
        done = self.call(FUNCTIONS[verb], *binding, *extra, stdin=stdin)
        if done.returncode != 0:
            raise HostFatal(
                f"storage sync {verb} failed ({done.returncode}): {done.stderr.decode().strip()}"
            )
        return _lenient_jsonl(done.stdout, verb)


class Relay:
    """The HTTP v1 calls of the host engine, with its headers."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=60)

    def close(self) -> None:
        self.http.close()

    def _ok(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise HostFatal(
                f"{response.request.url.path}: HTTP {response.status_code} {response.text}"
            )
        body: dict[str, Any] = response.json()
        return body

    def capabilities(self) -> dict[str, Any]:
        return self._ok(self.http.get("/v1/capabilities"))

    def members(self) -> dict[str, Any]:
        return self._ok(self.http.get("/v1/members"))

    def post_messages(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return self._ok(self.http.post("/v1/messages", json={"messages": messages}))

    def get_messages(self, after: int, limit: int = 1000) -> dict[str, Any]:
        return self._ok(self.http.get("/v1/messages", params={"after": str(after), "limit": limit}))

    def read_state(self, updates: list[dict[str, Any]], page_after: Any) -> httpx.Response:
        body = {"updates": updates, "page_after": page_after, "page_limit": 1000}
        return self.http.post("/v1/read-state/sync", json=body)


PREPARE = {
    "type": "sync_prepare",
    "envelope_v": 1,
    "cipher": "none",
    "key_id": None,
    "recipients": [],
    "max_blob_bytes": 1048576,
    "allow_new": True,
}


def push(machine: HostMachine, relay: Relay, limit: int = 100) -> int:
    """prepare → POST → reconcile; returns the pull's starting cursor."""
    records = machine.verb("prepare", str(limit), records=[PREPARE])
    states = [r for r in records if r.get("type") == "sync_state"]
    if not states:
        raise HostFatal("storage sync prepare returned no sync_state")
    cursor = _seq(states[0].get("transport_cursor"), "sync_state.transport_cursor")
    candidates = [r for r in records if r.get("type") == "sync_push_candidate"]
    if candidates:
        answer = relay.post_messages(
            [{"id": c["id"], "envelope": c["envelope"]} for c in candidates]
        )
        acks = [
            {
                "type": "sync_push_ack",
                "local_position": c["local_position"],
                "id": ack["id"],
                "server_seq": ack["server_seq"],
                "disposition": ack["disposition"],
            }
            for c, ack in zip(candidates, answer["acks"], strict=True)
        ]
        machine.verb("reconcile", records=acks)
    return cursor


def _pull_record(message: dict[str, Any]) -> dict[str, Any]:
    """The engine's classification of one pulled ``none`` envelope."""
    outcome = open_envelope(Envelope.from_obj(message["envelope"], "envelope"))
    if not isinstance(outcome, Importable):
        raise HostFatal(f"a plaintext envelope did not open: {outcome.reason}")
    projection = outcome.message.to_obj()
    return {
        "type": "sync_pull_message",
        "server_seq": message["server_seq"],
        "id": message["id"],
        "server_received_at": message["server_received_at"],
        "envelope": message["envelope"],
        "status": "importable",
        "policy_revision": "0",
        "local_security_revision": "0",
        "projection": projection,
    }


def pull(machine: HostMachine, relay: Relay, after: int) -> int:
    """Pages from ``after`` through apply (one apply per page, an empty
    page included, as the bootstrap does); returns the final cursor."""
    while True:
        page = relay.get_messages(after)
        expected = after
        for message in page["messages"]:
            expected += 1
            if _seq(message["server_seq"], "server_seq") != expected:
                raise HostFatal("the relay's page is not contiguous")
        records = [_pull_record(m) for m in page["messages"]]
        records.append({"type": "sync_pull_cursor", "next_after": page["next_after"]})
        machine.verb("apply", records=records)
        after = _seq(page["next_after"], "next_after")
        if not page["has_more"]:
            return after


def cycle(machine: HostMachine, relay: Relay) -> None:
    """One host engine cycle: push, pull from the prepare's cursor, read state."""
    after = push(machine, relay)
    pull(machine, relay, after)
    read_state(machine, relay)


def update_batches(
    members: list[dict[str, str]], records: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], set[str]]:
    """The host's check of a read-prepare answer and the updates it makes
    of it; returns (updates, blocked member IDs)."""
    known = {m["member_id"] for m in members}
    frontiers: dict[str, int] = {}
    exact: dict[str, list[str]] = {}
    blocked: set[str] = set()
    for record in records:
        member = record.get("member_id")
        if member not in known:
            raise HostFatal(f"driver emitted an unknown read member: {member!r}")
        kind = record.get("type")
        if kind == "sync_read_frontier":
            if member in frontiers:
                raise HostFatal("driver emitted a duplicate member read frontier")
            frontiers[member] = _seq(record.get("server_seq"), "sync_read_frontier.server_seq")
        elif kind == "sync_read_exact":
            wire = record.get("wire_id")
            if not isinstance(wire, str) or not UUID4.match(wire):
                raise HostFatal("driver emitted an exact read without a UUIDv4 wire ID")
            if wire in exact.get(member, []):
                raise HostFatal("driver emitted duplicate exact reads")
            exact.setdefault(member, []).append(wire)
        elif kind == "sync_read_blocked":
            if member in blocked:
                raise HostFatal("driver emitted a member blocked twice")
            if record.get("reason") not in ("member-name-mismatch", "read-state-limit-exceeded"):
                raise HostFatal(f"driver emitted an unknown block reason: {record.get('reason')!r}")
            blocked.add(member)
        else:
            raise HostFatal(f"unknown read-state record: {kind!r}")
    for member in blocked:
        if member in frontiers or member in exact:
            raise HostFatal("driver emitted read facts for a blocked member")
    updates = []
    for m in members:
        member = m["member_id"]
        if member in blocked:
            continue
        if member not in frontiers:
            raise HostFatal("driver omitted a member read frontier")
        updates.append(
            {
                "member_id": member,
                "server_seq": str(frontiers[member]),
                "exact_wire_ids": exact.get(member, []),
            }
        )
    return updates, blocked


def read_state(machine: HostMachine, relay: Relay) -> dict[str, Any]:
    """The read-state phase: context, prepare, POST, then every page
    through read-apply. Returns what the phase saw."""
    if "stage2-read-state" not in machine.capabilities():
        raise HostFatal("the driver does not advertise stage2-read-state")
    for _ in range(3):
        caps, roster = relay.capabilities(), relay.members()
        if caps["min_available_seq"] == roster["min_available_seq"]:
            break
    else:
        raise HostFatal("no consistent read-state snapshot")
    members = [{"member_id": m["member_id"], "name": m["name"]} for m in roster["members"]]
    context = {
        "type": "sync_read_context",
        "min_available_seq": caps["min_available_seq"],
        "current_seq": caps["current_seq"],
        "members": members,
        "local_agents": sorted(m["name"] for m in members),
    }
    records = machine.verb("read-prepare", records=[context])
    updates, blocked = update_batches(members, records)
    response = relay.read_state(updates, None)
    if response.status_code == 409:
        member = response.json()["error"]["details"]["member_id"]
        machine.verb(
            "read-block",
            records=[
                {
                    "type": "sync_read_block",
                    "member_id": member,
                    "reason": "read-state-limit-exceeded",
                }
            ],
        )
        updates = [u for u in updates if u["member_id"] != member]
        response = relay.read_state(updates, None)
    pages = 0
    while True:
        page = relay._ok(response)
        snapshot = {
            "type": "sync_read_snapshot",
            "min_available_seq": page["min_available_seq"],
            "current_seq": page["current_seq"],
        }
        items: list[dict[str, Any]] = []
        for item in page["items"]:
            if item["kind"] == "frontier":
                items.append(
                    {
                        "type": "sync_read_frontier",
                        "member_id": item["member_id"],
                        "server_seq": item["server_seq"],
                    }
                )
            else:
                items.append(
                    {
                        "type": "sync_read_exact",
                        "member_id": item["member_id"],
                        "wire_id": item["wire_id"],
                    }
                )
        machine.verb("read-apply", records=[snapshot, *items])
        pages += 1
        if not page["has_more"]:
            break
        response = relay.read_state([], page["next_page_after"])
    return {"updates": updates, "blocked": blocked, "pages": pages, "prepared": records}


def reprocess_walk(machine: HostMachine, current_seq: int, limit: int = 2) -> list[dict[str, Any]]:
    """The host's reprocess walk, page by page, each page checked."""
    candidates: list[dict[str, Any]] = []
    page_after: str | None = None
    state: dict[str, Any] | None = None
    last: tuple[int, str] = (0, "")
    while True:
        extra = [str(limit)] + ([page_after] if page_after is not None else [])
        records = machine.verb("reprocess", *extra)
        states = [r for r in records if r.get("type") == "sync_state"]
        pages = [r for r in records if r.get("type") == "sync_reprocess_page"]
        found = [r for r in records if r.get("type") == "sync_reprocess_candidate"]
        if len(states) != 1 or len(pages) != 1 or len(found) + 2 != len(records):
            raise HostFatal("a reprocess page needs one sync_state, one page record, candidates")
        if records[-1] is not pages[0]:
            raise HostFatal("the page record must come last")
        _seq(states[0].get("transport_cursor"), "sync_state.transport_cursor")
        if state is not None and (state["transport_cursor"], state["driver_generation"]) != (
            states[0]["transport_cursor"],
            states[0]["driver_generation"],
        ):
            raise HostFatal("the reprocess state changed between pages")
        state = states[0]
        page = pages[0]
        if set(page) != {"type", "next_after", "has_more"}:
            raise HostFatal(f"reprocess page keys {sorted(page)}")
        if len(found) > limit:
            raise HostFatal("a reprocess page holds more than its limit")
        for candidate in found:
            if set(candidate) != {
                "type",
                "server_seq",
                "id",
                "server_received_at",
                "envelope",
                "prior_status",
            }:
                raise HostFatal(f"reprocess candidate keys {sorted(candidate)}")
            seq = _seq(candidate["server_seq"], "candidate.server_seq")
            if seq == 0 or seq > current_seq or not UUID4.match(candidate["id"]):
                raise HostFatal("a reprocess candidate out of range")
            if (seq, candidate["id"]) <= last:
                raise HostFatal("reprocess candidates repeat or go backwards")
            last = (seq, candidate["id"])
        if page["has_more"]:
            if not found or page["next_after"] != f"{found[-1]['server_seq']}:{found[-1]['id']}":
                raise HostFatal("next_after must be the last candidate's key")
        elif page["next_after"] is not None:
            raise HostFatal("next_after must be null on the last page")
        candidates.extend(found)
        if not page["has_more"]:
            return candidates
        page_after = page["next_after"]
