"""``connect``: pair a device with a relay team and persist the binding atomically.

specs/engine.md §3.1; server/spec/v1.md "Pairing and
per-device credentials". The order is what makes a failure leave nothing
half-connected:

1. every local input is validated first — security mode, age-v1 epoch
   (key_id + recipients file), identity (must belong to the manifest), the
   team not already connected, the credential file not already present
   (except an interrupted connect's orphan at the default path, which is
   renamed aside once pairing succeeds: :func:`_orphan_credential`) —
   so a mistake never burns the one-time token;
2. :func:`syncengine.http.pairing` runs health → exchange → verification
   and persists nothing;
3. the bearer credential is written to its own 0600 file (atomic rename);
4. one store transaction writes the local team (if new), the Stage-1
   binding, the connection row, local security revision 0 (effective from
   sequence 1, the chosen mode) and the status row — crash points
   ``engine.connect.credential_written``, ``.before_commit`` and
   ``.after_commit`` bracket it. If it fails the
   credential file is removed and the relay credential revoked (best
   effort), and :class:`ConnectFailed` says so.

A key-epoch or security history is never started afresh over a team's
existing one by accident (specs/engine.md §3.1; profile
"Epoch snapshots": a new device obtains the confirmed checkpoint, and the
server's policy alone never enables writes): when the relay's stream
already holds messages and the team's policy requires, or ever required,
e2ee — or this connect starts an age-v1 epoch — connect refuses unless it
is given the team's confirmed snapshot (``--epochs-file``,
``--confirm-digest``) or the explicit ``--start-new-key-history``
(:func:`_refuse_fresh_history`). The same transaction retains the epoch
checkpoint (:mod:`syncengine.engine.epoch_checkpoint`); a checkpoint the
store kept from an earlier connection of this relay team must be extended,
never reset silently.

The pairing token arrives as ``--token -`` (stdin) or ``--token @PATH``;
a literal value is refused (:func:`read_token`): argv is visible to every
user through ``ps`` and ``/proc``, and lands in shell history.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import quote

import httpx

from syncengine.crash import crash_point
from syncengine.engine import state as st
from syncengine.engine.epoch_checkpoint import (
    CheckpointRefused,
    admit,
    load_checkpoint,
    replace_checkpoint,
    save_checkpoint,
)
from syncengine.engine.epoch_ops import assign_identity, read_recipients, read_snapshot
from syncengine.engine.epochs import EpochHistory, EpochSnapshot, KeyEpoch
from syncengine.engine.errors import (
    AlreadyConnected,
    ConfigurationError,
    ConnectFailed,
    NotConnected,
    TokenSourceRefused,
)
from syncengine.engine.roster import roster_pairs
from syncengine.engine.security import NONE, SecurityHistory, SecurityMode
from syncengine.http.client import ClientConfig, RelayBinding, RelayClient
from syncengine.http.credentials import Secret, load_credential, save_credential
from syncengine.http.pairing import ConnectResult
from syncengine.http.pairing import connect as http_connect
from syncengine.http.retry import RetryPolicy
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.private_files import PrivateFileRefused, read_private_file
from syncengine.store import teams
from syncengine.store.connection import read_transaction, write_transaction
from syncengine.store.errors import InvalidInput
from syncengine.store.names import check_local_team
from wire.errors import WireError
from wire.scalars import format_timestamp

if TYPE_CHECKING:
    import apsw

    from wire.http_v1.capabilities import Capabilities

__all__ = [
    "Connected",
    "EpochConfig",
    "FreshHistoryRefused",
    "connect_store",
    "default_credential_path",
    "read_token",
]

_log = logging.getLogger(__name__)

#: A pairing token is at most 1024 characters; read a little more to notice junk.
_MAX_TOKEN_READ = 4096


def read_token(source: str, stdin: BinaryIO) -> Secret:
    """The pairing token from ``-`` (stdin) or ``@PATH``; a literal is refused.

    Errors name the source and the rule, never the token.
    """
    if source == "-":
        data = stdin.read(_MAX_TOKEN_READ + 1)
        where = "standard input"
    elif source.startswith("@") and len(source) > 1:
        path = Path(source[1:])
        try:
            data = read_private_file(path, "token file", _MAX_TOKEN_READ)
        except PrivateFileRefused as exc:
            raise ConfigurationError(
                str(exc),
                remediation="Write the token to a file only you can read "
                "((umask 077; … > FILE)), or pass '--token -' and use standard input.",
            ) from None
        where = str(path)
    else:
        raise TokenSourceRefused(
            "--token takes '-' (read standard input) or '@PATH' (read a file); a literal "
            "token on the command line is refused because argv is visible to other users "
            "(ps, /proc) and is kept in shell history"
        )
    if len(data) > _MAX_TOKEN_READ:
        raise ConfigurationError(f"the pairing token from {where} is too long")
    try:
        return Secret.from_text(data.decode("ascii"), "pairing token")
    except (UnicodeDecodeError, WireError):
        raise ConfigurationError(
            f"the pairing token from {where} is malformed: one line of RFC 6750 "
            "b64token characters is expected"
        ) from None


class FreshHistoryRefused(ConfigurationError):
    """``connect`` would start a fresh security or key-epoch history on a
    team whose relay stream already has one (specs/engine.md
    §3.1)."""

    code = "fresh-history-refused"


def default_credential_path(store_path: Path, team: str) -> Path:
    """``<store-dir>/credentials/<team>.json`` (team name percent-encoded),
    absolute: the binding records it, and a later ``sync`` from cron runs in
    another working directory (issue #15)."""
    return store_path.absolute().parent / "credentials" / f"{quote(team, safe='')}.json"


@dataclass(frozen=True, slots=True)
class EpochConfig:
    """A validated age-v1 epoch: key_id, manifest and (optionally) identity path."""

    key_id: str
    recipients: tuple[str, ...]
    identity_path: str | None

    @classmethod
    def load(
        cls, key_id: str | None, recipients_file: str | None, identity_file: str | None
    ) -> EpochConfig | None:
        if key_id is None and recipients_file is None:
            if identity_file is not None:
                raise ConfigurationError(
                    "--identity needs the epoch it belongs to (--key-id and --recipients-file)"
                )
            return None
        if key_id is None or recipients_file is None:
            raise ConfigurationError("--key-id and --recipients-file go together")
        # start-up pin (CRYPTO): a plaintext connect loads no wire.age_profile
        from wire.age_profile import EpochManifest, install_identity

        manifest = EpochManifest.from_strings(key_id, read_recipients(key_id, recipients_file))
        identity_path = None
        if identity_file is not None:
            path = Path(identity_file).absolute()
            try:
                install_identity(manifest, path.read_bytes())
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot read identity file {path}: {exc.strerror}"
                ) from None
            except WireError as exc:
                raise ConfigurationError(f"identity file {path}: {exc.rule}") from None
            identity_path = str(path)
        recipients_text = tuple(r.to_string() for r in manifest.recipients)
        return cls(manifest.key_id, recipients_text, identity_path)


@dataclass(frozen=True, slots=True)
class Connected:
    """What ``connect`` persisted (no secret)."""

    key: BindingKey
    endpoint: str
    remote_team_name: str
    credential_id: str
    credential_path: Path
    mode: SecurityMode
    epoch: EpochConfig | None
    write_allowed_ciphers: tuple[str, ...]
    #: An interrupted connect's credential file, renamed aside (not deleted).
    orphaned_credential_file: Path | None = None
    #: The relay's retention floor at connect: above 0, the first pull gets
    #: a 410 until an operator accepts the gap (specs/engine.md §5.3).
    min_available_seq: int = 0
    #: ``--start-new-key-history`` was needed and used: the team starts over.
    started_new_key_history: bool = False

    def to_obj(self) -> dict[str, object]:
        return {
            "connected": True,
            "team": self.key.local_team,
            "endpoint": self.endpoint,
            "server_instance_id": self.key.server_instance_id,
            "remote_team_id": self.key.remote_team_id,
            "remote_team_name": self.remote_team_name,
            "protocol_version": self.key.protocol_version,
            "credential_id": self.credential_id,
            "credential_file": str(self.credential_path),
            "security_mode": self.mode.value,
            "age_v1_key_id": self.epoch.key_id if self.epoch else None,
            "write_allowed_ciphers": list(self.write_allowed_ciphers),
            "orphaned_credential_file": (
                str(self.orphaned_credential_file) if self.orphaned_credential_file else None
            ),
            "min_available_seq": str(self.min_available_seq),
            "started_new_key_history": self.started_new_key_history,
        }


def connect_store(
    store_path: str | os.PathLike[str] | None,
    *,
    endpoint: str,
    token: Secret,
    team: str,
    mode: str | None,
    key_id: str | None = None,
    recipients_file: str | None = None,
    identity_file: str | None = None,
    credential_file: str | None = None,
    epochs_file: str | None = None,
    confirm_digest: str | None = None,
    start_new_key_history: bool = False,
    transport: httpx.BaseTransport | None = None,
    client_config: ClientConfig | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Connected:
    """Pair, then persist credential and binding; all or nothing locally.

    With ``epochs_file`` the machine joins a team whose key-epoch and local
    security histories already exist: it imports them from the snapshot the
    operator confirmed (``confirm_digest``) instead of trusting whatever it
    pulls first (profile "Epoch snapshots").

    ``start_new_key_history`` is the operator's explicit choice to begin a
    new history over a stream that already has messages (the team knowingly
    starts over); it is refused together with ``epochs_file``."""
    try:
        check_local_team(team, "team")
    except InvalidInput as exc:
        raise ConfigurationError(str(exc)) from None
    if start_new_key_history and epochs_file is not None:
        raise ConfigurationError(
            "--start-new-key-history starts a new history and --epochs-file joins the "
            "team's: give one of them"
        )
    epochs, history, epoch, snapshot = _local_histories(
        mode, key_id, recipients_file, identity_file, epochs_file, confirm_digest
    )
    security = history.current.mode
    store = Store(store_path)
    try:
        store.init()
        _refuse_if_connected(store, team)
        cred_path = (
            Path(credential_file).absolute()
            if credential_file
            else default_credential_path(store.path, team)
        )
        orphan = None
        if cred_path.exists() or cred_path.is_symlink():
            orphan = _orphan_credential(cred_path) if credential_file is None else None
            if orphan is None:
                raise ConfigurationError(
                    f"credential file {cred_path} already exists",
                    remediation="If an earlier connect was interrupted, remove the file and ask "
                    "the relay operator to revoke its credential; otherwise choose "
                    "--credential-file.",
                )
        cred_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)

        result = http_connect(
            endpoint, token, config=client_config, transport=transport, sleep=sleep, clock=clock
        )
        key = BindingKey(team, result.server_instance_id, result.team_id)
        orphaned = _set_aside(cred_path, orphan) if orphan is not None else None
        save_credential(cred_path, result.credential)
        crash_point("engine.connect.credential_written")
        now = format_timestamp(datetime.now(UTC))
        started_over = False
        try:
            if snapshot is not None:
                _check_snapshot_binding(snapshot, key)
            started_over = _refuse_fresh_history(
                result.capabilities, team, snapshot, epoch, start_new_key_history
            )
            roster = fetch_roster(result, transport, client_config, sleep, clock)
            with write_transaction(store.conn, store.path, "engine.connect") as conn:
                binding = st.insert_connection(
                    conn,
                    key,
                    endpoint=result.endpoint,
                    remote_team_name=result.team_name,
                    credential_id=result.credential_id,
                    credential_path=str(cred_path),
                    epochs=epochs,
                    security=history,
                    now=now,
                )
                _retain_checkpoint(
                    conn, binding.pk, key, snapshot, epochs, history,
                    start_new_key_history, now,
                )  # fmt: skip
                # The roster comes from the relay, never from message names
                # (driver-interface §2 intro): a second machine's `send` of
                # a roster member needs no `team add-member`.
                teams.adopt_roster(conn, binding.team_pk, roster, now)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                cred_path.unlink()
            revoked = revoke_quietly(result.endpoint, result, transport, client_config)
            note = " (the relay credential was revoked)" if revoked else ""
            if isinstance(exc, AlreadyConnected):
                raise
            if isinstance(exc, FreshHistoryRefused | CheckpointRefused):
                # The operator's fix is a flag or a file, not a relay problem:
                # the refusal stands as it is, with what was undone.
                raise type(exc)(f"{exc.message}{note}", remediation=exc.remediation) from None
            raise ConnectFailed(
                f"could not complete the connection (roster or store): {exc}{note}"
            ) from exc
        return Connected(
            key=key,
            endpoint=result.endpoint,
            remote_team_name=result.team_name,
            credential_id=result.credential_id,
            credential_path=cred_path,
            mode=security,
            epoch=epoch,
            write_allowed_ciphers=result.capabilities.current_policy.write_allowed_ciphers,
            orphaned_credential_file=orphaned,
            min_available_seq=result.capabilities.binding.min_available_seq,
            started_new_key_history=started_over,
        )
    finally:
        store.close()


def _local_histories(
    mode: str | None,
    key_id: str | None,
    recipients_file: str | None,
    identity_file: str | None,
    epochs_file: str | None,
    confirm_digest: str | None,
) -> tuple[EpochHistory, SecurityHistory, EpochConfig | None, EpochSnapshot | None]:
    """The key-epoch and security histories a new connection starts with,
    validated before the one-time token is spent."""
    if epochs_file is None:
        if confirm_digest is not None:
            raise ConfigurationError("--confirm-digest belongs to --epochs-file")
        if mode is None:
            raise ConfigurationError("--security is required (or --epochs-file)")
        try:
            security = SecurityMode(mode)
        except ValueError:
            raise ConfigurationError(
                "--security must be 'plaintext-allowed' or 'e2ee-required'"
            ) from None
        epoch = EpochConfig.load(key_id, recipients_file, identity_file)
        if security is SecurityMode.E2EE_REQUIRED and epoch is None:
            raise ConfigurationError(
                "e2ee-required needs an age-v1 epoch to write with (--key-id, --recipients-file)"
            )
        epochs = EpochHistory(
            ()
            if epoch is None
            else (KeyEpoch(0, 1, epoch.key_id, epoch.recipients, epoch.identity_path),)
        )
        return epochs, SecurityHistory.initial(security), epoch, None
    if key_id is not None or recipients_file is not None:
        raise ConfigurationError(
            "--epochs-file carries the team's epochs; --key-id and --recipients-file go"
        )

    snapshot = read_snapshot(epochs_file, confirm_digest)
    history = SecurityHistory(snapshot.security)
    if mode is not None and SecurityMode(mode) is not history.current.mode:
        raise ConfigurationError(
            f"--security {mode} contradicts the snapshot's current minimum "
            f"{history.current.mode.value}; drop --security or use the snapshot's"
        )
    epochs = EpochHistory(snapshot.epochs)
    if identity_file is not None:
        epochs = assign_identity(epochs, identity_file)
    current = epochs.epochs[-1]
    summary = EpochConfig(current.key_id, current.recipients, current.identity_path)
    return epochs, history, summary, snapshot


def _check_snapshot_binding(snapshot: EpochSnapshot, key: BindingKey) -> None:
    """A snapshot is bound to one relay instance and remote team (profile
    "Recipient-set epochs": a manifest binds server_instance_id and team_id)."""
    if (snapshot.server_instance_id, snapshot.team_id) != (
        key.server_instance_id,
        key.remote_team_id,
    ):
        raise ConfigurationError(
            f"the epoch snapshot belongs to team {snapshot.team_id} on relay instance "
            f"{snapshot.server_instance_id}, not to the team this token paired with"
        )


def _refuse_fresh_history(
    caps: Capabilities,
    team: str,
    snapshot: EpochSnapshot | None,
    epoch: EpochConfig | None,
    start_new: bool,
) -> bool:
    """Refuse to start a fresh security or key-epoch history at revision 0
    from sequence 1 over a stream that already has messages, when the team's
    policy requires or ever required e2ee, or this connect starts an age-v1
    epoch (it would judge every earlier age-v1 message by a key history the
    team never had). Returns whether ``start_new`` was needed (the operator
    knowingly starts over; logged as a warning)."""
    if snapshot is not None or caps.current_seq == 0:
        return False
    ever_e2ee = any(NONE not in entry.write_allowed_ciphers for entry in caps.policy_history)
    if not ever_e2ee and epoch is None:
        return False  # a team that only ever allowed plaintext joins as before
    if start_new:
        _log.warning(
            "STARTING A NEW KEY HISTORY for team %s over %d sequence(s) the relay already "
            "holds (--start-new-key-history): earlier encrypted messages are judged by it",
            team,
            caps.current_seq,
        )
        return True
    why = (
        "its policy requires, or once required, end-to-end encryption"
        if ever_e2ee
        else "this connect starts an age-v1 key-epoch history"
    )
    raise FreshHistoryRefused(
        f"team {team!r}'s relay stream already holds {caps.current_seq} sequence(s) and {why}: "
        "a fresh security and key-epoch history (revision 0 from sequence 1) would judge "
        "that history without the team's confirmed one",
        remediation="On a connected machine run 'syncengine keys epoch export --output FILE', "
        "confirm the digest it prints over a live channel, then connect with a new pairing "
        "token and '--epochs-file FILE --confirm-digest DIGEST'. Only a team that knowingly "
        "starts its key history over passes --start-new-key-history.",
    )


def _retain_checkpoint(
    conn: apsw.Connection,
    binding_pk: int,
    key: BindingKey,
    snapshot: EpochSnapshot | None,
    epochs: EpochHistory,
    security: SecurityHistory,
    start_new: bool,
    now: str,
) -> None:
    """Inside connect's transaction: retain the epoch checkpoint — the
    confirmed snapshot, or the root of the history this connect starts.
    A checkpoint the store kept from an earlier connection of the same relay
    team (``disconnect`` does not reset it) must be extended by the snapshot,
    or equal the new root, unless the operator starts over."""
    if not epochs.configured:
        return
    retained = load_checkpoint(conn, binding_pk)
    if snapshot is not None:
        if retained is not None:
            held = retained.held()
            admit(retained, snapshot, EpochHistory(held.epochs if held else ()))
            if retained.snapshot_sha256 == snapshot.digest():
                return
        save_checkpoint(conn, binding_pk, snapshot, now)
        return
    root = EpochSnapshot(
        key.server_instance_id, key.remote_team_id, epochs.epochs, security.entries
    )
    if retained is None:
        save_checkpoint(conn, binding_pk, root, now)
    elif retained.snapshot_sha256 != root.digest():
        if not start_new:
            raise CheckpointRefused(
                f"this store retains epoch snapshot {retained.describe()} from an earlier "
                f"connection of this relay team; a fresh key-epoch history (revision 0, sha256 "
                f"{root.digest()}) would reset it",
                remediation="Connect with the team's current snapshot (--epochs-file, "
                "--confirm-digest), or pass --start-new-key-history if the team knowingly "
                "starts over.",
            )
        replace_checkpoint(conn, binding_pk, root, now)


def _orphan_credential(path: Path) -> str | None:
    """The credential ID of a file left at the store's own default path by a
    connect that died between writing it and committing (crash points
    ``engine.connect.credential_written`` / ``engine.connect.before_commit``).

    Only called when the store has no connection for the team, so nothing
    refers to the file. ``None`` (refuse, as before) unless it is a regular,
    private, valid credential file of this user: anything else is not ours
    to move.
    """
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return load_credential(path).credential_id
    except Exception:
        return None


def _set_aside(path: Path, credential_id: str) -> Path:
    """Rename an orphan credential out of the way (kept, still 0600, so the
    operator can have it revoked); never deleted silently."""
    aside = path.with_name(f"{path.stem}.orphan-{credential_id}{path.suffix}")
    os.replace(path, aside)
    _log.warning(
        "set aside orphan credential %s from an interrupted connect as %s; "
        "ask the relay operator to revoke it",
        credential_id,
        aside,
    )
    return aside


def _refuse_if_connected(store: Store, team: str) -> None:
    with read_transaction(store.conn, store.path) as conn:
        try:
            st.connection_for(conn, team)
        except NotConnected:
            return
    raise AlreadyConnected(f"team {team!r} is already connected to a relay")


def fetch_roster(
    result: object,
    transport: httpx.BaseTransport | None,
    config: ClientConfig | None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[tuple[str, str]]:
    """The team's roster from an authenticated ``GET /v1/members`` with the
    credential just issued: ``(member_id, name)`` pairs. A name the local
    rules cannot hold (a ``:`` in it) can never be on a local message, so it
    is left out with a warning rather than failing the connection."""
    assert isinstance(result, ConnectResult)
    with RelayClient(
        result.endpoint,
        binding=RelayBinding(result.server_instance_id, result.team_id),
        credential=result.credential,
        config=config,
        transport=transport,
        sleep=sleep,
        clock=clock,
    ) as client:
        document = client.members()
    return roster_pairs(document)


def revoke_quietly(
    endpoint: str,
    result: object,
    transport: httpx.BaseTransport | None,
    config: ClientConfig | None,
) -> bool:
    """Best effort: a credential we cannot record should not stay valid."""
    assert isinstance(result, ConnectResult)
    try:
        with RelayClient(
            endpoint,
            binding=RelayBinding(result.server_instance_id, result.team_id),
            credential=result.credential,
            config=config or ClientConfig(retry=RetryPolicy(max_attempts=2, max_elapsed=10.0)),
            transport=transport,
        ) as client:
            client.revoke_credential(result.credential_id)
    except Exception:
        return False
    return True
