"""How the engine records a store failure that carries its own fix
(syncengine/engine/errors.py ``classify``; issue #33): the failure's
remedy is the store's, not a generic line."""

from __future__ import annotations

from syncengine.engine.errors import classify
from syncengine.store.errors import InvalidInput, StoreFull, StoreUnsafe


def test_a_full_disk_is_recorded_with_its_own_remedy() -> None:
    fix = "free space on the filesystem holding /x, then run the command again"
    record = classify(StoreFull("/x/store.db", "the disk is full", fix))
    assert record.remediation == fix
    assert record.exit_code == 13


def test_a_store_others_can_write_is_recorded_with_its_chmod() -> None:
    record = classify(StoreUnsafe("/x/store.db", "mode 0666", "chmod 600 /x/store.db"))
    assert record.remediation == "chmod 600 /x/store.db"


def test_a_store_error_without_its_own_fix_keeps_the_generic_remedy() -> None:
    record = classify(InvalidInput("team", "no such team"))
    assert record.remediation.startswith("See the message")
