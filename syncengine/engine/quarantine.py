"""What an operator does about each kind of held envelope (issue #15, item 4).

The statuses are the profile outcomes of message-synchronization.md
"Quarantine" and our two (wire/block_states.py); only ``pending_key`` and
``unsupported_cipher`` can clear on this machine (a key installed, a newer
program), after which ``reprocess`` imports them. ``before_join`` needs
nothing: the answer says so, and how a machine gets the older history
anyway (seeding from a backup, issue #33). The others are the relay's or
the sender's to fix.
"""

from __future__ import annotations

from syncengine.engine import state as st

__all__ = ["blocked_remedy"]


def blocked_remedy(status: str, connection: st.ConnectionRecord) -> str:
    team = connection.local_team
    epoch = connection.age_key_id or "(none configured)"
    if status == "pending_key" and len(connection.epochs.epochs) <= 1:
        return (
            f"Install this machine's identity for epoch {epoch}: syncengine security identity "
            f"FILE --team {team}; then run syncengine reprocess --team {team}. An envelope of "
            "another key ID is an epoch another machine added: import the team's snapshot "
            "first (syncengine keys epoch import)."
        )
    if status == "pending_key":
        return (
            "Install this machine's identity for the envelope's epoch (its key ID is in "
            f"'syncengine quarantine list --team {team}'): syncengine security identity FILE "
            f"--team {team}. A key ID missing from 'syncengine keys epoch list' is an epoch "
            "another machine added: import the team's snapshot first (syncengine keys epoch "
            f"import). Then run syncengine reprocess --team {team}."
        )
    if status == "before_join":
        return (
            "Nothing to do: these messages were sealed before this machine joined the team, "
            "to an epoch it was never a recipient of, so they cannot be opened here (they do "
            "not block syncing). To give this machine the team's older history, seed it from "
            f"a teammate's backup: syncengine seed --input FILE --team {team}."
        )
    if status == "manifest_mismatch":
        return (
            "The envelope's age header does not carry one recipient per entry of the epoch "
            "manifest it names: its writer sealed to another recipient set than the team's "
            "(a drifted epoch history). It is never imported. The sender must import the "
            "team's current epoch snapshot (syncengine keys epoch import) and send again."
        )
    if status == "authentication_failed":
        return (
            f"The envelope does not open with this machine's identity for epoch {epoch}: this "
            "machine is probably not a recipient of the epoch it was sealed for. A teammate "
            "must seal to an epoch that includes this machine's recipient."
        )
    if status == "policy_violation":
        return (
            "The envelope breaks the security policy effective at its sequence (a cipher or "
            f"key ID not allowed there); it is never imported. See: syncengine security show "
            f"--team {team}."
        )
    if status == "unsupported_cipher":
        return (
            "This program cannot open that cipher; upgrade it, then run "
            f"syncengine reprocess --team {team}."
        )
    return "The envelope is damaged or not a v1 message; the sender's program must be fixed."
