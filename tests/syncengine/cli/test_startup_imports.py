"""What each host-facing command imports (issue #17, deliverable 1: start-up).

A scheduled ``pull``/``push``/``sync`` and every ``send``, ``status`` and
``inbox`` a host makes pay their imports on each start. Each test runs one
command as its own process through a small harness that, after the command
returned, writes every module the process imported (``sys.modules``) to a
file; the test then names what that command must never load. The lists are
explicit: a new import of the HTTP stack, the crypto library or another
command's machinery on one of these paths fails here, with the module
named. No wall-clock is asserted (bench/bench_startup.py measures that).

The harness counts only modules that were imported from somewhere: the
stand-in for httpx's optional CLI that ``syncengine`` registers up front
(syncengine/_startup.py) has no spec and is not an import of httpx.

The last test proves the other half of the trick: a command's parser built
alone (what :func:`syncengine.cli.main` does for a known command) is the
same parser, with the same help, as in the full tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.local_store import Store
from tests.support.live_relay import LiveRelay, relay_fixture
from tests.support.machines import Machine, Team

#: The HTTP client stack and its retry library.
HTTP_STACK = ("httpx", "httpcore", "h11", "anyio", "tenacity", "ssl", "http.client", "certifi")
#: Cryptography (age-v1 sealing and opening) and its wire profile.
CRYPTO = ("cryptography", "pyrage", "wire.age_profile", "wire.age_format", "wire.age_keys")
#: The relay server and its web stack: never part of a client command.
RELAY_SERVER = ("relay", "starlette", "uvicorn")
#: httpx's optional command-line tool and what it drags in.
HTTPX_CLI = ("click", "rich", "pygments")
#: Worker processes: an idle command starts none.
WORKER_POOL = ("multiprocessing", "concurrent.futures.process")
#: The sync engine's relay machinery, which only relay commands need.
RELAY_CLIENT = (
    "syncengine.http.client",
    "syncengine.http.guard",
    "syncengine.http.retry",
    "syncengine.engine.cycle",
    "syncengine.engine.watched_client",
    "syncengine.engine.read_sync",
    "wire.http_v1.messages",
    "wire.http_v1.read_state",
)
#: The message pipeline and its records: a pull that finds nothing past its
#: cursor, and a push with every message acknowledged, stop before importing
#: them (the read-state phase does not need them).
MESSAGE_PIPELINE = (
    "syncengine.engine.cycle",
    "syncengine.engine.batching",
    "syncengine.engine.evaluation",
    "syncengine.ops.sync_records",
    "syncengine.ops.apply_pull",
    "syncengine.ops.prepare_push",
    "syncengine.ops.reconcile_push",
    "wire.http_v1.messages",
    "wire.envelope",
)
#: The retry loop: a relay that answers at once never brings it in.
RETRY_LOOP = ("tenacity", "syncengine.http.retry_loop")
#: What only other engine commands use: connect, resync, doctor, pairing, health,
#: disconnect — an idle pull/push/sync loads none of it.
OTHER_COMMANDS = (
    "syncengine.engine.connect",
    "syncengine.engine.resync",
    "syncengine.ops.resync",
    "syncengine.ops.status",
    "syncengine.ops.quarantine",
    "syncengine.engine.doctor",
    "syncengine.engine.disconnect",
    "syncengine.engine.reconnect",
    "syncengine.engine.runloop",
    "wire.http_v1.pairing",
    "wire.http_v1.health",
)

#: Runs ``syncengine.cli.main(argv)``, then writes the imported modules to argv[1].
HARNESS = """\
import json, sys
from syncengine.cli import main
out, argv = sys.argv[1], sys.argv[2:]
try:
    code = main(argv)
finally:
    loaded = sorted(n for n, m in list(sys.modules.items())
                    if m is not None and getattr(m, "__spec__", None) is not None)
    with open(out, "w", encoding="utf-8") as sink:
        json.dump(loaded, sink)
sys.exit(code)
"""


def imported_by(*argv: str, tmp: Path, stdin: str = "") -> set[str]:
    """Every module ``syncengine ARGV`` imported, run as its own process."""
    out = tmp / f"modules-{argv[0]}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNCENGINE_")}
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, str(out), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(out.read_text(encoding="utf-8")))


def loaded_from(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are, or lie inside, a forbidden name."""
    return sorted(
        name
        for name in modules
        if any(name == banned or name.startswith(banned + ".") for banned in forbidden)
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="startup-relay")


@pytest.fixture(scope="module")
def connected(live: LiveRelay, tmp_path_factory: pytest.TempPathFactory) -> Machine:
    """A store connected to the live relay, its messages pushed and the
    relay's pulled: every later pull, push or sync has nothing to do."""
    machine = Team(live, tmp_path_factory.mktemp("startup-team")).machine("a")
    machine.send("alice", "bob", "one", "two")
    machine.sync()
    return machine


@pytest.fixture
def local_store(tmp_path: Path) -> Path:
    """A store with one team and no connection (what ``send`` writes to)."""
    path = tmp_path / "local.db"
    with Store(path) as store:
        store.init()
        store.create_team("crew", ["alice", "bob"])
    return path


def test_send_imports_no_http_stack_crypto_engine_or_relay(
    local_store: Path, tmp_path: Path
) -> None:
    modules = imported_by(
        "send", "crew", "alice", "bob", "-", "--store", str(local_store), tmp=tmp_path, stdin="hi"
    )
    forbidden = (
        *HTTP_STACK,
        *CRYPTO,
        *RELAY_SERVER,
        *HTTPX_CLI,
        *RELAY_CLIENT,
        "syncengine.engine",
        "dataclasses",  # ~10 ms of start-up on every host call (inspect, ast)
    )
    assert loaded_from(modules, forbidden) == []


def test_inbox_imports_no_http_stack_crypto_engine_or_relay(
    connected: Machine, tmp_path: Path
) -> None:
    modules = imported_by("inbox", "crew", "bob", "--store", str(connected.store), tmp=tmp_path)
    forbidden = (
        *HTTP_STACK,
        *CRYPTO,
        *RELAY_SERVER,
        *HTTPX_CLI,
        *RELAY_CLIENT,
        "syncengine.engine",
        "dataclasses",  # ~10 ms of start-up on every host call (inspect, ast)
    )
    assert loaded_from(modules, forbidden) == []


def test_status_imports_no_http_stack_crypto_cycle_or_resync_records(
    connected: Machine, tmp_path: Path
) -> None:
    # status reads the store only: no request, so no HTTP stack and none of
    # the push/pull records; the resync records only once a gap was accepted.
    modules = imported_by("status", "--store", str(connected.store), tmp=tmp_path)
    forbidden = (
        *HTTP_STACK, *CRYPTO, *RELAY_SERVER, *HTTPX_CLI, *RELAY_CLIENT, *WORKER_POOL,
        "syncengine.ops.sync_records", "syncengine.ops.resync", "syncengine.engine.resync",
        "syncengine.engine.connect",
        # the security history needs no capability document, an epoch no digest
        "wire.http_v1.capabilities", "hashlib",
        # blocked counts need the state names, not the listing or opened envelopes
        "syncengine.ops.quarantine", "wire.outcome", "wire.message",
        "signal",  # only a worker process ignores SIGINT
    )  # fmt: skip
    assert loaded_from(modules, forbidden) == []


def test_idle_pull_imports_no_crypto_workers_retry_loop_relay_or_other_commands(
    connected: Machine, tmp_path: Path
) -> None:
    modules = imported_by("pull", "--store", str(connected.store), tmp=tmp_path)
    forbidden = (*CRYPTO, *RELAY_SERVER, *HTTPX_CLI, *WORKER_POOL, *RETRY_LOOP, *OTHER_COMMANDS)
    assert loaded_from(modules, forbidden) == []
    assert "httpx" in modules  # the harness sees the imports it is there to see


def test_idle_pull_imports_no_message_pipeline_or_its_records(
    connected: Machine, tmp_path: Path
) -> None:
    modules = imported_by("pull", "--store", str(connected.store), tmp=tmp_path)
    assert loaded_from(modules, MESSAGE_PIPELINE) == []
    assert "syncengine.ops.read_records" in modules  # the read-state phase still ran


@pytest.mark.parametrize("command", ["push", "sync"])
def test_idle_push_and_sync_import_no_message_pipeline_or_its_records(
    command: str, connected: Machine, tmp_path: Path
) -> None:
    # The write plan asks the cipher registry (wire.profiles) what this build
    # supports, and the registry's own module defines the envelope.
    pipeline = tuple(name for name in MESSAGE_PIPELINE if name != "wire.envelope")
    modules = imported_by(command, "--store", str(connected.store), tmp=tmp_path)
    assert loaded_from(modules, pipeline) == []
    assert "syncengine.engine.security" in modules  # the write plan was still made


def test_idle_push_imports_no_crypto_workers_retry_loop_relay_or_other_commands(
    connected: Machine, tmp_path: Path
) -> None:
    # push asks which ciphers this build supports; the age-v1 profile is
    # found without being imported, so a plaintext push with nothing to seal
    # never loads the crypto library.
    modules = imported_by("push", "--store", str(connected.store), tmp=tmp_path)
    forbidden = (*CRYPTO, *RELAY_SERVER, *HTTPX_CLI, *WORKER_POOL, *RETRY_LOOP, *OTHER_COMMANDS)
    assert loaded_from(modules, forbidden) == []


def test_idle_sync_imports_no_crypto_workers_retry_loop_relay_or_other_commands(
    connected: Machine, tmp_path: Path
) -> None:
    modules = imported_by("sync", "--store", str(connected.store), tmp=tmp_path)
    forbidden = (*CRYPTO, *RELAY_SERVER, *HTTPX_CLI, *WORKER_POOL, *RETRY_LOOP, *OTHER_COMMANDS)
    assert loaded_from(modules, forbidden) == []


def _helps(parser: object) -> dict[str, str]:
    """Every (sub)command path of ``parser`` → its full help text."""
    found: dict[str, str] = {}

    def walk(node: object, path: str) -> None:
        found[path] = node.format_help()  # type: ignore[attr-defined]
        for action in node._actions:  # type: ignore[attr-defined]
            if action.__class__.__name__ == "_SubParsersAction":
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")

    walk(parser, "syncengine")
    return found


def test_a_command_built_alone_has_the_same_parser_help_as_in_the_full_tree() -> None:
    from syncengine.cli import COMMANDS, build_parser

    full = _helps(build_parser())
    for command, module in COMMANDS.items():
        alone = _helps(build_parser((module,), only=command))
        prefix = f"syncengine {command}"
        subtree = {path: text for path, text in full.items() if path.split()[:2] == prefix.split()}
        assert {path: text for path, text in alone.items() if path != "syncengine"} == subtree
