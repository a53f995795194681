"""The result of opening an envelope: importable, or one blocking state.

The states are the quarantine vocabulary of server/spec/v1.md "Pull state
layers" and docs/spec/age-v1-profile.md's failure table. The type is closed:
a caller handles :class:`Importable` and :class:`Blocked`, and a blocked
envelope carries no projection of its contents at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wire.block_states import BlockState

if TYPE_CHECKING:
    from wire.message import Message

__all__ = ["BlockState", "Blocked", "Importable", "OpenOutcome"]


@dataclass(frozen=True, slots=True)
class Importable:
    """The envelope opened and its plaintext passed every rule."""

    message: Message

    @property
    def state(self) -> str:
        return "importable"


@dataclass(frozen=True, slots=True)
class Blocked:
    """The envelope must stay quarantined; ``reason`` is for the operator."""

    state: BlockState
    reason: str


OpenOutcome = Importable | Blocked
