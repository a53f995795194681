"""The main job on embedded defaults: two machines sync through a real relay.

``bash scripts/demo.sh`` runs this. It does, with the real ``syncengine``
commands a user would type (each one its own process, printed as it runs):

1. creates a working directory, ``relay init`` a relay database and starts
   ``relay serve`` on 127.0.0.1 (a free port) in the background;
2. creates the team on machine A, exports its provisioning document and
   applies it on the relay;
3. generates one age identity per machine and writes the epoch's
   recipients file with both recipients;
4. issues one pairing token per machine; the relay CLI's stdout goes
   straight into a 0600 file that ``connect --token @FILE`` reads, so the
   token is never on a command line, in this output or in a log;
5. connects both machines with ``--security e2ee-required`` to the epoch;
6. sends messages both ways, syncs both machines until each has pulled
   the other's, and prints both inboxes and each machine's ``status``;
7. stops the relay (SIGTERM) and removes the working directory (``--keep``
   keeps it, to look around or continue by hand).

Exit status: 0 only when each inbox holds exactly the expected messages,
each once; 1 when a check fails; 2 when a command fails (its stderr is
shown).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["EXPECTED_INBOXES", "MESSAGES", "inbox_problems", "main", "working_directory"]

TEAM = "crew"
EPOCH = "epoch-1"
#: (machine, from, to, body) in the order they are sent.
MESSAGES: tuple[tuple[str, str, str, str], ...] = (
    ("a", "alice", "bob", "Please run the test suite on the release branch"),
    ("a", "alice", "bob", "…and tag rc1 if it is green"),
    ("b", "bob", "alice", "All 412 tests pass ✅ — rc1 tagged"),
)
#: machine -> (agent whose inbox is read there, the messages it must hold).
EXPECTED_INBOXES: dict[str, tuple[str, tuple[tuple[str, str, str], ...]]] = {
    machine: (agent, tuple((f, t, body) for _, f, t, body in MESSAGES if t == agent))
    for machine, agent in (("a", "alice"), ("b", "bob"))
}
_STARTUP_SECONDS = 30.0
_COMMAND_TIMEOUT = 120.0


def on_machine(name: str, *args: str) -> tuple[str, ...]:
    """``ARGS --store machine-NAME/store.db``: each machine is its own store."""
    return (*args, "--store", f"machine-{name}/store.db")


class CommandFailed(Exception):
    """A demo step's command exited non-zero."""


def inbox_problems(
    expected: Sequence[tuple[str, str, str]], records: Sequence[dict[str, object]]
) -> list[str]:
    """What is wrong with an inbox: missing, unexpected or duplicated messages."""
    got = [(str(r.get("from")), str(r.get("to")), str(r.get("body"))) for r in records]
    problems = [f"missing: {m[0]} -> {m[1]}: {m[2]}" for m in expected if m not in got]
    problems += [f"unexpected: {m[0]} -> {m[1]}: {m[2]}" for m in got if m not in expected]
    problems += [
        f"{got.count(m)} copies of: {m[0]} -> {m[1]}: {m[2]}"
        for m in dict.fromkeys(got)
        if got.count(m) > 1
    ]
    return problems


@contextmanager
def working_directory(keep: bool) -> Iterator[Path]:
    """A fresh private directory, removed afterwards unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix="syncengine-demo-"))
    try:
        yield path
    finally:
        if keep:
            print(f"\nkept the working directory: {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


@dataclass
class Demo:
    root: Path
    out: IO[str]

    # -- output ---------------------------------------------------------------------------

    def section(self, title: str) -> None:
        self.out.write(f"\n=== {title} ===\n")

    def say(self, text: str) -> None:
        self.out.write(f"{text}\n")

    # -- running commands -----------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        # The demo is self-contained: no inherited store, relay DB or crash point.
        skip = {"SYNCENGINE_STORE", "SYNCENGINE_CRASH_AT", "SYNCENGINE_RELAY_DB"}
        return {k: v for k, v in os.environ.items() if k not in skip}

    def _start(self, args: Sequence[str], stdout: IO[str] | None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "syncengine", *args],
            cwd=self.root,
            env=self._env(),
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def _finish(self, args: Sequence[str], process: subprocess.Popen[str], show: bool) -> str:
        self.say(f"$ syncengine {shlex.join(args)}")
        try:
            out, err = process.communicate(timeout=_COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise CommandFailed(f"'syncengine {args[0]}' did not finish in time") from None
        if process.returncode != 0:
            raise CommandFailed(
                f"'syncengine {args[0]}' exited {process.returncode}:\n{err.rstrip()}"
            )
        text = out or ""
        if show and text.strip():
            self.say("\n".join("    " + line for line in text.rstrip("\n").splitlines()))
        return text

    def run(self, *args: str, stdout: IO[str] | None = None, show: bool = True) -> str:
        """``syncengine ARGS`` in the working directory; its output is echoed."""
        return self._finish(args, self._start(args, stdout), show)

    def run_together(self, *commands: Sequence[str], show: bool = True) -> list[str]:
        """Independent commands at once (each is a process start-up saved);
        their commands and output are shown in the order given."""
        started = [(args, self._start(args, None)) for args in commands]
        try:
            return [self._finish(args, process, show) for args, process in started]
        finally:
            for _, process in started:
                if process.poll() is None:
                    process.kill()
                    process.wait()

    def machine(self, name: str, *args: str, show: bool = True) -> str:
        return self.run(*on_machine(name, *args), show=show)

    # -- the relay process ----------------------------------------------------------------

    def start_relay(self) -> tuple[subprocess.Popen[str], IO[str]]:
        args = ("relay", "serve", "--db", "relay.db", "--host", "127.0.0.1", "--port", "0")
        self.say(f"$ syncengine {shlex.join(args)} --no-access-log &")
        log = open(self.root / "relay.log", "w", encoding="utf-8")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "syncengine", *args, "--no-access-log"],
            cwd=self.root,
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        return process, log

    def wait_listening(self, process: subprocess.Popen[str]) -> int:
        """The port the relay announces, once its health endpoint answers."""
        assert process.stdout is not None
        deadline = time.monotonic() + _STARTUP_SECONDS
        ready, _, _ = select.select([process.stdout], [], [], _STARTUP_SECONDS)
        line = process.stdout.readline() if ready else ""
        if not line:
            raise CommandFailed(f"the relay did not start; see {self.root / 'relay.log'}")
        port = int(json.loads(line)["port"])
        while True:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                connection.request("GET", "/v1/health", headers={"Agmsg-Protocol-Version": "1"})
                if connection.getresponse().status == 200:
                    return port
            except OSError:
                pass
            finally:
                connection.close()
            if time.monotonic() > deadline or process.poll() is not None:
                raise CommandFailed(f"the relay is not healthy; see {self.root / 'relay.log'}")
            time.sleep(0.05)

    # -- the story ------------------------------------------------------------------------

    def pairing_token(self, team_id: str, name: str) -> str:
        """Issue a token straight into a new 0600 file; returns ``@PATH``."""
        path = self.root / f"machine-{name}" / "pairing-token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            self.run(
                "relay", "token", "issue", "--db", "relay.db", "--team", team_id, stdout=handle
            )
        self.say(f"    (token written to {path.relative_to(self.root)}, mode 0600; not shown)")
        return f"@machine-{name}/pairing-token"

    def story(self) -> list[str]:
        """Everything from an empty directory to two checked inboxes."""
        self.section("1. Relay: create its database, serve HTTP API v1 on 127.0.0.1")
        self.run("relay", "init", "--db", "relay.db")
        relay, log = self.start_relay()
        try:
            return self._with_relay(relay)
        finally:
            self.section("9. Stop the relay")
            relay.terminate()
            try:
                code = relay.wait(timeout=20)
            except subprocess.TimeoutExpired:
                relay.kill()
                code = relay.wait(timeout=5)
            log.close()
            # uvicorn shuts down gracefully on SIGTERM, then re-raises it.
            clean = code in (0, -signal.SIGTERM)
            self.say("relay stopped" + ("" if clean else f" abnormally (exit status {code})"))

    def _with_relay(self, relay: subprocess.Popen[str]) -> list[str]:
        for name in ("a", "b"):
            (self.root / f"machine-{name}").mkdir(mode=0o700)

        self.section("2. Team: created on machine A, provisioned on the relay")
        members = ("--member", "alice", "--member", "bob")
        self.run_together(
            on_machine("a", "team", "create", TEAM, *members),
            on_machine("b", "team", "create", TEAM, *members),
        )
        self.say("    (machine B keeps the same team locally; local IDs are each store's own)")
        self.machine("a", "team", "export-provisioning", TEAM, "--output", "team.json")
        team_id = str(json.loads((self.root / "team.json").read_text())["team_id"])
        port = self.wait_listening(relay)
        endpoint = f"http://127.0.0.1:{port}"
        self.say(f"    (the relay listens on {endpoint})")
        self.run("relay", "team", "apply", "team.json", "--db", "relay.db")

        self.section("3. Keys: one age identity per machine, one epoch recipients file")
        recipients = [
            out.strip()
            for out in self.run_together(
                *(("keys", "generate", "--output", f"machine-{n}/identity.key") for n in "ab")
            )
        ]
        (self.root / f"{EPOCH}.recipients").write_text("".join(r + "\n" for r in recipients))
        self.say(f"    (wrote {EPOCH}.recipients with both recipients)")

        self.section("4. Pairing: one single-use token per machine, in a 0600 file")
        tokens = {name: self.pairing_token(team_id, name) for name in ("a", "b")}

        self.section("5. Connect both machines, end-to-end encryption required")
        self.run_together(
            *(
                on_machine(
                    name, "connect", "--endpoint", endpoint, "--token", tokens[name],
                    "--team", TEAM, "--security", "e2ee-required", "--key-id", EPOCH,
                    "--recipients-file", f"{EPOCH}.recipients",
                    "--identity", f"machine-{name}/identity.key",
                )
                for name in ("a", "b")
            )
        )  # fmt: skip
        for token in tokens.values():
            (self.root / token[1:]).unlink()  # spent: pairing tokens are single use

        self.section("6. Send: messages both ways, stored locally first")
        sends = [on_machine(name, "send", TEAM, f, t, body) for name, f, t, body in MESSAGES]
        # Different machines may send at once; one machine's sends stay in order.
        self.run_together(sends[0], sends[2], show=False)
        self.run(*sends[1], show=False)

        self.section("7. Sync: A pushes, B pushes and pulls, A pulls")
        for name in ("a", "b", "a", "b"):
            self.say(f"machine {name.upper()}:")
            self.machine(name, "sync")

        self.section("8. Inboxes, and what each machine and the relay report")
        problems: list[str] = []
        inboxes = self.run_together(
            *(on_machine(name, "inbox", TEAM, agent, "--json") for name, (agent, _) in
              EXPECTED_INBOXES.items()),
            show=False,
        )  # fmt: skip
        for (name, (agent, expected)), text in zip(EXPECTED_INBOXES.items(), inboxes, strict=True):
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
            for r in records:
                self.say(f"    {r['at']}  {r['from']} -> {r['to']}: {r['body']}")
            problems += [f"machine {name.upper()} inbox of {agent}: {p}" for p in
                         inbox_problems(expected, records)]  # fmt: skip
        self.run_together(
            on_machine("a", "status"),
            on_machine("b", "status"),
            ("relay", "status", "--db", "relay.db"),
        )
        return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m syncengine.demo",
        description="Two machines syncing end-to-end encrypted messages through a local relay.",
    )
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args(argv)
    print("syncengine demo: two machines, one relay on 127.0.0.1, age-v1 end to end")
    with working_directory(args.keep) as root:
        print(f"working directory: {root}")
        demo = Demo(root, sys.stdout)
        try:
            problems = demo.story()
        except (CommandFailed, OSError) as exc:
            print(f"\nFAILED: {exc}")
            return 2
        if problems:
            print("\nFAILED: " + "\n        ".join(problems))
            return 1
        print("\nok: each inbox holds exactly the expected messages, once")
        return 0


if __name__ == "__main__":
    sys.exit(main())
