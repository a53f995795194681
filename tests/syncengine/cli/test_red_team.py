"""Red team at the command line (issue #33): each row is one hostile or
mistaken invocation of the client ``syncengine`` or the ``syncengine relay``
CLI, run as its own process against a throw-away store. Every row must end
in a clear answer: the exit code its ``--help`` documents, exactly one
line naming the problem (argparse's usage lines and an indented
``remedy:`` line are the documented form around it), no traceback, and the
store exactly as it was (a dump before and after; a store that did not exist
is not created).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from syncengine.cli import build_parser

#: No PostgreSQL server listens on port 1 of the loopback address.
NO_POSTGRES = "postgresql://relay@127.0.0.1:1/relaydb"


@dataclass(frozen=True)
class Row:
    name: str
    argv: tuple[str, ...]
    code: int
    names: str  # what the one problem line must say
    store: str = "team"  # which throw-away store: see _make_store
    stdin: bytes = b""
    env: dict[str, str] = field(default_factory=dict)


ROWS = [
    # -- the inputs of issue #33 ------------------------------------------------------------
    Row("typo of a known team", ("send", "crwe", "alice", "bob", "-"), 13,
        "did you mean 'crew'?", stdin=b"hi"),
    Row("typo of a command", ("statsu",), 2, "did you mean 'status'?"),
    Row("store with a lying user_version", ("send", "crew", "alice", "bob", "-"), 12,
        "says schema version 2", store="version2", stdin=b"hi"),
    Row("limit beyond SQLite", ("history", "crew", "--limit", "99999999999999999999"), 13,
        "limit must be at most"),
    Row("stored body not UTF-8", ("history", "crew"), 12, "not UTF-8 text", store="bad-utf8"),
    Row("relay status on a client store", ("relay", "status", "--db", "{store}"), 2,
        "not a relay database: it is a syncengine client store"),
    Row("PostgreSQL with no server", ("relay", "status", "--database", NO_POSTGRES), 3,
        "127.0.0.1 port 1", store="none"),
    # -- more of the same spirit ------------------------------------------------------------
    Row("unknown agent of a known team", ("send", "crew", "alice", "zed", "-"), 13,
        "no member 'zed'", stdin=b"hi"),
    Row("close agent name", ("send", "crew", "alicia", "bob", "-"), 13,
        "did you mean 'alice'?", stdin=b"hi"),
    Row("unknown team, nothing close", ("send", "zzzz", "alice", "bob", "-"), 13,
        "no team 'zzzz'", stdin=b"hi"),
    Row("empty body argument", ("send", "crew", "alice", "bob", ""), 13, "must not be empty"),
    Row("empty body on stdin", ("send", "crew", "alice", "bob", "-"), 13, "must not be empty"),
    Row("body on stdin not UTF-8", ("send", "crew", "alice", "bob", "-"), 13, "not UTF-8",
        stdin=b"ab\xffcd"),
    Row("body argument not UTF-8", ("send", "crew", "alice", "bob", "\udcff"), 13,
        "not valid UTF-8"),
    Row("team argument not UTF-8", ("send", "cr\udcffew", "alice", "bob", "x"), 13,
        "did you mean 'crew'?"),
    Row("unknown flag", ("send", "crew", "alice", "bob", "x", "--bogus"), 2,
        "unrecognized arguments: --bogus"),
    Row("negative limit", ("history", "crew", "--limit", "-5"), 13, "positive integer"),
    Row("limit not a number", ("inbox", "crew", "bob", "--limit", "ten"), 2,
        "invalid int value"),
    Row("zero limit", ("inbox", "crew", "bob", "--limit", "0"), 13, "positive integer"),
    Row("store is a directory", ("history", "crew", "--store", "{dir}"), 13,
        "is a directory, not a store file", store="none"),
    Row("store under a missing directory", ("inbox", "crew", "bob", "--store",
        "{tmp}/missing/s.db"), 13, "does not exist", store="none"),
    Row("store that is not SQLite", ("history", "crew"), 12, "is damaged", store="junk"),
    Row("truncated store", ("history", "crew"), 12, "is damaged", store="truncated"),
    Row("team created twice", ("team", "create", "crew", "--member", "x"), 13,
        "already exists"),
    Row("choice typo", ("quarantine", "list", "--status", "pending-key"), 2,
        "did you mean 'pending_key'?"),
    Row("log format typo", ("--log-format", "jsno", "history", "crew"), 2,
        "did you mean 'json'?"),
    Row("engine command on an unconnected store", ("status",), 7,
        "no team of this store is connected"),
    Row("run interval below the minimum", ("run", "--interval", "-1"), 2,
        "interval must be at least"),
    Row("deadline not a number", ("sync", "--deadline", "nan"), 2, "argument --deadline"),
    Row("absurd push limit", ("push", "--limit", "99999999999999999999"), 2,
        "within 1..1000"),
    Row("negative resync floor", ("resync", "--team", "crew", "--accept-floor", "-1"), 2,
        "--accept-floor"),
    Row("token from a missing @FILE", ("connect", "--token", "@{tmp}/missing-token",
        "--endpoint", "http://127.0.0.1:9", "--team", "crew", "--security",
        "plaintext-allowed"), 7, "no token file"),
    Row("literal token on argv", ("connect", "--token", "secret-token", "--endpoint",
        "http://127.0.0.1:9", "--team", "crew", "--security", "plaintext-allowed"), 2,
        "--token"),
    Row("epoch import before connecting", ("keys", "epoch", "import", "--file",
        "{tmp}/missing", "--confirm-digest", "abc"), 7,
        "keys epoch import: no team of this store is connected"),
    Row("identity file missing", ("keys", "recipient", "{tmp}/missing.key"), 2,
        "cannot read"),
    Row("identity under a missing directory", ("keys", "generate", "--output",
        "{tmp}/missing/id.key"), 2, "cannot write", store="none"),
    Row("restore from a file that is not a store", ("restore", "--input", "{junk}"), 12,
        "is damaged"),
    Row("backup into a missing directory", ("backup", "--output", "{tmp}/missing/b.db"), 13,
        "is not a directory"),
    Row("wait with a negative timeout", ("wait", "--team", "crew", "--agent", "bob",
        "--timeout", "-1"), 2, "timeout must be"),
    Row("relay database missing", ("relay", "status", "--db", "{tmp}/missing.db"), 2,
        "no relay database at", store="none"),
    Row("relay database is a directory", ("relay", "status", "--db", "{dir}"), 2,
        "is a directory", store="none"),
    Row("relay database not SQLite", ("relay", "status", "--db", "{junk}"), 2,
        "not an SQLite file", store="none"),
    Row("relay command typo", ("relay", "stauts", "--db", "{store}"), 2,
        "did you mean 'status'?"),
]  # fmt: skip


def _make_store(kind: str, path: Path) -> None:
    """A throw-away store of ``kind`` at ``path`` (``none``: no file at all)."""
    if kind == "none":
        return
    if kind in ("junk", "truncated"):
        _make_store("team", path.with_suffix(".full"))
        data = path.with_suffix(".full").read_bytes()
        path.write_bytes(b"this is not a database\n" if kind == "junk" else data[:4096])
        return
    from syncengine.local_store import Store

    with Store(path) as store:
        store.init()
        store.create_team("crew", ["alice", "bob"])
        store.send("crew", "alice", "bob", "hello bob")
    conn = sqlite3.connect(path)
    try:
        if kind == "version2":
            conn.execute("PRAGMA user_version = 2")
        elif kind == "bad-utf8":
            conn.execute("UPDATE messages SET body = CAST(x'ff41fe' AS TEXT)")
        conn.commit()
    finally:
        conn.close()


def _dump(path: Path) -> str | None:
    """Everything the store holds, as SQL (bodies as bytes, so a damaged one
    dumps too), or the file's digest when it is no SQLite database; ``None``
    when there is no file."""
    if not path.exists():
        return None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.text_factory = lambda raw: raw.decode("utf-8", "backslashreplace")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            return f"user_version {version}\n" + "\n".join(conn.iterdump())
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return digest


def _documented_codes(argv: tuple[str, ...]) -> str:
    """The exit-code text of the invoked command's ``--help`` (the leaf parser
    the arguments name; the top level for an unknown command)."""
    parser = build_parser()
    words = [a for a in argv if not a.startswith("-")]
    node = parser
    for word in words:
        subs = [a for a in node._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs or word not in subs[0].choices:  # type: ignore[operator]
            break
        node = subs[0].choices[word]
    return node.epilog or ""


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_every_hostile_input_ends_in_one_clear_line_and_changes_nothing(
    row: Row, tmp_path: Path
) -> None:
    store = tmp_path / "s.db"
    _make_store(row.store, store)
    (tmp_path / "a-directory").mkdir()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database\n")
    places = {"store": str(store), "tmp": str(tmp_path), "dir": str(tmp_path / "a-directory")}
    argv = [a.format(**places, junk=junk) for a in row.argv]
    before = _dump(store)
    env = {**os.environ, "SYNCENGINE_STORE": str(store), **row.env}
    env.pop("SYNCENGINE_RELAY_DATABASE", None)
    result = subprocess.run(
        [sys.executable, "-m", "syncengine", *(os.fsencode(a) for a in argv)],
        input=row.stdin,
        capture_output=True,
        timeout=60,
        env=env,
        check=False,
    )
    stderr = result.stderr.decode("utf-8", "backslashreplace")
    assert "Traceback" not in stderr, stderr
    assert result.returncode == row.code, stderr
    problem = [
        line for line in stderr.splitlines() if line and not line.startswith(("usage:", " ", "\t"))
    ]
    assert len(problem) == 1, stderr
    assert row.names in problem[0], stderr
    assert _dump(store) == before
    codes = _documented_codes(tuple(argv))
    assert f"{row.code} " in codes or (row.code == 2 and "2 " in codes), (row.code, codes)


def test_the_table_holds_the_issues_inputs_and_twenty_more() -> None:
    assert len(ROWS) >= 7 + 20
    assert len({row.name for row in ROWS}) == len(ROWS)
