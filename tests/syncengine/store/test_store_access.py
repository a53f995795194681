"""Files others can touch (issue #33, deliverable 2; specs/store.md §12.1):
a store another user owns or can write is refused the way ssh refuses such
a key — the path, what was found, and the fix — and one others can only
read is opened and named by :func:`store_exposure`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.store import StoreUnsafe
from syncengine.store.connection import store_exposure

NOBODY = 65534
as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a file to another user (chown) needs root"
)


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "s" / "store.db"
    with Store(path) as store:
        store.send("crew", "alice", "bob", "private words")
    return path


def _refused(path: Path) -> StoreUnsafe:
    with pytest.raises(StoreUnsafe) as caught, Store(path) as store:
        store.history("crew")
    return caught.value


def test_a_new_store_and_its_wal_and_shm_are_created_0600(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with Store(tmp_path / "s" / "store.db") as store:
            store.send("crew", "alice", "bob", "hi")
            files = sorted((tmp_path / "s").iterdir())
            assert [f.name for f in files] == ["store.db", "store.db-shm", "store.db-wal"]
            assert {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o600}
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640, 0o644])
def test_a_store_only_its_owner_can_write_is_opened(tmp_path: Path, mode: int) -> None:
    path = _store(tmp_path)
    path.chmod(mode)
    with Store(path) as store:
        assert [m.body for m in store.history("crew")] == ["private words"]


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o660, 0o666, 0o664])
def test_a_store_group_or_others_can_write_is_refused_with_chmod(tmp_path: Path, mode: int) -> None:
    path = _store(tmp_path)
    path.chmod(mode)
    refused = _refused(path)
    assert str(path) in str(refused) and f"{mode:04o}" in str(refused)
    assert "other users can write it" in str(refused)
    assert refused.remediation == f"chmod 600 {path}"
    assert "\n" not in str(refused)


def test_a_wal_file_others_can_write_is_refused(tmp_path: Path) -> None:
    path = _store(tmp_path)
    wal = Path(f"{path}-wal")
    wal.touch(mode=0o600)
    wal.chmod(0o666)
    refused = _refused(path)
    assert "wal file" in str(refused) and refused.remediation == f"chmod 600 {wal}"


@as_root
def test_a_store_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    path = _store(tmp_path)
    os.chown(path, NOBODY, NOBODY)
    refused = _refused(path)
    assert f"uid {NOBODY}" in str(refused) and "not by you" in str(refused)
    assert "--store" in refused.remediation


@as_root
def test_a_symlink_to_another_users_store_is_refused(tmp_path: Path) -> None:
    theirs = _store(tmp_path)
    os.chown(theirs, NOBODY, NOBODY)
    link = tmp_path / "mine.db"
    link.symlink_to(theirs)
    refused = _refused(link)
    assert f"symlink to {theirs}" in str(refused) and f"uid {NOBODY}" in str(refused)


def test_a_symlink_to_my_own_store_is_opened(tmp_path: Path) -> None:
    mine = _store(tmp_path)
    link = tmp_path / "link.db"
    link.symlink_to(mine)
    with Store(link) as store:
        assert len(store.history("crew")) == 1


@as_root
def test_a_symlink_another_user_owns_is_refused(tmp_path: Path) -> None:
    mine = _store(tmp_path)
    link = tmp_path / "link.db"
    link.symlink_to(mine)
    os.lchown(link, NOBODY, NOBODY)
    refused = _refused(link)
    assert "symlink owned by" in str(refused) and refused.remediation.endswith(f"rm {link}")


def test_a_directory_others_can_write_without_the_sticky_bit_is_refused(tmp_path: Path) -> None:
    path = _store(tmp_path)
    path.parent.chmod(0o777)
    refused = _refused(path)
    assert "other users can replace the store" in str(refused)
    assert refused.remediation.startswith(f"chmod go-w {path.parent}")


def test_a_sticky_directory_like_tmp_is_accepted(tmp_path: Path) -> None:
    """/tmp (1777): others can create names there but not rename or delete
    ours, so the store itself is still only ours to change."""
    path = _store(tmp_path)
    path.parent.chmod(0o1777)
    with Store(path) as store:
        assert len(store.history("crew")) == 1


def test_a_store_others_can_read_is_opened_and_named_by_store_exposure(tmp_path: Path) -> None:
    path = _store(tmp_path)
    assert store_exposure(path) == []
    path.chmod(0o644)
    with Store(path) as store:
        assert len(store.history("crew")) == 1
    (warning,) = store_exposure(path)
    assert str(path) in warning and "0644" in warning and f"chmod 600 {path}" in warning


def test_a_refused_store_is_not_opened_at_all(tmp_path: Path) -> None:
    """The check runs before SQLite: no -wal/-shm appear beside a refused store."""
    path = _store(tmp_path)
    path.chmod(0o666)
    _refused(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["store.db"]
