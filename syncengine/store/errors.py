"""The store's exception hierarchy and the driver status names it maps to.

Every failure a store operation can report is a :class:`StoreError`, and
every class carries the storage-contract status (driver-interface §1.4) the
driver command prints and exits with::

    StoreError                       (runtime_error, 13)
    ├── InvalidInput                 caller's input breaks a rule (names, IDs, sizes, JSONL)
    │   ├── UnknownTeam              no team of that name in the registry
    │   ├── UnknownAgent             no member of that name in the team
    │   └── UnknownMessage           an ID that is not a message of that team/agent
    ├── Conflict                     input contradicts stored state (duplicate name, import clash)
    ├── StoreBusy                    the write lock stayed taken past the busy timeout (retryable)
    ├── StoreNotInitialized          no store at the path; run ``init``
    ├── StoreTooNew                  the schema is newer than this program
    ├── StoreUnsafe                  another user owns or can write the store: refused
    ├── StoreFull                    the filesystem is full (SQLITE_FULL, ENOSPC, EDQUOT)
    ├── StoreIOError                 the OS failed a read or write of the store file
    ├── CorruptStore                 (corrupt_state, 12) the file or its invariants are damaged
    └── MissingDependency            (missing_deps, 10) a runtime dependency is absent

Messages name the problem and, where useful, the remedy; they never echo a
message body (which may be private) and never include secrets. The three
file-level failures (:class:`StoreUnsafe`, :class:`StoreFull`,
:class:`StoreIOError`) are one line naming the path, the cause and the fix,
which is also in ``remediation``; they keep ``runtime_error`` (13) because
the storage contract has no other code for them (specs/store.md §12).
"""

from __future__ import annotations

import enum
from typing import ClassVar

__all__ = [
    "Conflict",
    "CorruptStore",
    "InvalidInput",
    "MissingDependency",
    "Status",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreIOError",
    "StoreNotInitialized",
    "StoreTooNew",
    "StoreUnsafe",
    "UnknownAgent",
    "UnknownMessage",
    "UnknownTeam",
]


class Status(enum.Enum):
    """Driver status names and exit codes (driver-interface §1.4)."""

    OK = ("ok", 0)
    MISSING_DEPS = ("missing_deps", 10)
    CORRUPT_STATE = ("corrupt_state", 12)
    RUNTIME_ERROR = ("runtime_error", 13)

    @property
    def label(self) -> str:
        return self.value[0]

    @property
    def exit_code(self) -> int:
        return self.value[1]


class StoreError(Exception):
    """Base of every store failure; ``status`` is what the driver reports."""

    status: ClassVar[Status] = Status.RUNTIME_ERROR
    retryable: ClassVar[bool] = False


class InvalidInput(StoreError):
    """The caller supplied something the contract refuses; nothing was stored.

    ``field`` names the argument or record field at fault.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class UnknownTeam(InvalidInput):
    def __init__(self, team: str) -> None:
        super().__init__("team", f"no team named {team!r}; create it with 'syncengine team create'")
        self.team = team


class UnknownAgent(InvalidInput):
    def __init__(self, team: str, agent: str, field: str = "agent") -> None:
        super().__init__(
            field,
            f"team {team!r} has no member {agent!r}; add it with 'syncengine team add-member'",
        )
        self.team = team
        self.agent = agent


class UnknownMessage(InvalidInput):
    def __init__(self, message_id: str, why: str) -> None:
        super().__init__("id", f"message {message_id!r} {why}")
        self.message_id = message_id


class Conflict(StoreError):
    """The request contradicts what is stored (e.g. a name already taken)."""


class StoreBusy(StoreError):
    """Another process held the write lock for longer than the busy timeout.

    Distinct from every other failure so callers can retry; nothing changed.
    """

    retryable = True


class StoreNotInitialized(StoreError):
    """There is no initialized store at the path (``init`` creates one)."""


class StoreTooNew(StoreError):
    """The store was written by a newer syncengine; this one must not touch it."""


class _FileProblem(StoreError):
    """A failure of the store's file itself: ``problem`` and ``remediation``
    make up the one-line message, ``path`` is the file at fault."""

    def __init__(self, path: object, problem: str, remediation: str) -> None:
        super().__init__(f"{problem}; {remediation}")
        self.path = path
        self.problem = problem
        self.remediation = remediation


class StoreUnsafe(_FileProblem):
    """Another user owns the store (or the link to it), or can write it or
    its directory: it is refused, as ssh refuses such a key (nothing was read)."""


class StoreFull(_FileProblem):
    """The filesystem holding the store has no room (SQLITE_FULL, ENOSPC or
    EDQUOT). The transaction was rolled back: nothing was written."""


class StoreIOError(_FileProblem):
    """The operating system failed a read or write of the store (SQLITE_IOERR,
    a read-only filesystem, EIO). The transaction was rolled back."""


class CorruptStore(StoreError):
    """The database file or an invariant of its contents is damaged."""

    status = Status.CORRUPT_STATE


class MissingDependency(StoreError):
    """A runtime dependency (the APSW SQLite binding) cannot be loaded."""

    status = Status.MISSING_DEPS
