"""contrib/: the systemd units and the crontab line are valid, and the crontab
line, exactly as shipped (placeholders filled in), syncs two machines through a
real relay on 127.0.0.1 from cron's minimal environment."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.live_relay import issue_token, provision, running_relay

REPO = Path(__file__).resolve().parents[2]
CONTRIB = REPO / "contrib"
SCRIPT = REPO / "scripts" / "check_contrib.py"
BIN = Path(sys.executable).parent


def load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_contrib", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_contrib", module)
    spec.loader.exec_module(module)
    return module


check = load_checker()


def test_check_script_passes_on_the_shipped_files() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FAIL")]
    analyze = next(line for line in lines if "systemd-analyze" in line)
    if shutil.which("systemd-analyze"):
        assert "verify clean" in analyze
    else:
        assert "not available" in analyze


def _mutated(tmp_path: Path, rel: str, old: str, new: str) -> Path:
    contrib = tmp_path / "contrib"
    shutil.copytree(CONTRIB, contrib)
    path = contrib / rel
    lines = path.read_text().splitlines(keepends=True)
    settings = [i for i, line in enumerate(lines) if not line.startswith("#") and old in line]
    assert len(settings) == 1, (rel, old)  # the setting itself, not a comment
    lines[settings[0]] = lines[settings[0]].replace(old, new)
    path.write_text("".join(lines))
    return contrib


@pytest.mark.parametrize(
    ("rel", "old", "new", "complaint"),
    [
        (check.SYNC_SERVICE, "sync --team %I", "sync --teem %I", "CLI rejects"),
        (check.SYNC_SERVICE, "sync --team %I", "synch --team %I", "CLI rejects"),
        (check.SYNC_SERVICE, "TimeoutStartSec=20min", "TimeoutStartSec=10min", "must exceed"),
        (check.SYNC_SERVICE, "Type=oneshot", "Type=simple", "oneshot"),
        (check.SYNC_TIMER, "Persistent=true", "Persistent=false", "Persistent"),
        (check.SYNC_TIMER, "RandomizedDelaySec=2min", "RandomizedDelaySec=0", "positive"),
        (check.RUN_SERVICE, "run --team %I", "sync --team %I", "expected 'run'"),
        (check.RUN_SERVICE, "Restart=on-failure", "Restart=always", "on-failure"),
        (check.RUN_SERVICE, "KillSignal=SIGTERM", "KillSignal=SIGKILL", "SIGTERM"),
        (
            check.CRON,
            "@SYNCENGINE@ sync --store @STORE@ --team",
            "SYNCENGINE_STORE=@STORE@ @SYNCENGINE@ sync --team",
            "needs --store",
        ),
        (check.CRON, "--deadline 270", "--deadline 900", "before the next run"),
        (check.CRON, "--deadline 270", "--deadline soon", "CLI rejects"),
        (check.CRON, "date -u;", "date +%s;", "unescaped %"),
        (check.CRON, ">> @LOG@", "> /dev/null", "@LOG@"),
        (check.CRON, "2-59/5   *", "2-59/5   25", "outside"),
        (check.RELAY_SERVICE, "relay serve --host", "relay sereve --host", "CLI rejects"),
        (check.RELAY_SERVICE, "ProtectSystem=strict", "ProtectSystem=full", "ProtectSystem"),
        (check.RELAY_SERVICE, "NoNewPrivileges=yes", "NoNewPrivileges=no", "NoNewPrivileges"),
        (check.RELAY_SERVICE, "User=syncengine-relay", "User=root", "not root"),
        (check.RELAY_SERVICE, "TimeoutStopSec=30s", "TimeoutStopSec=10s", "--shutdown-timeout"),
        (
            check.RELAY_SERVICE,
            "--log-format json",
            "--db postgresql://relay:pw@127.0.0.1/relay",
            "EnvironmentFile",
        ),
    ],
)
def test_check_script_refuses_broken_files(
    tmp_path: Path, rel: str, old: str, new: str, complaint: str
) -> None:
    contrib = _mutated(tmp_path, rel, old, new)
    results = check.run_checks(contrib, use_systemd_analyze=False)
    failed = [(name, detail) for name, detail, passed in results if not passed]
    assert [name for name, _ in failed] == [rel], failed
    assert complaint in failed[0][1]


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="no systemd-analyze")
@pytest.mark.parametrize(
    ("rel", "old", "new"),
    [
        (check.SYNC_SERVICE, "Nice=10", "Nice=abc"),
        (check.SYNC_SERVICE, "UMask=0077", "Umask=0077"),
        (check.SYNC_TIMER, "OnCalendar=*:0/5", "OnCalendar=every five minutes"),
        (check.RUN_SERVICE, "RestartSec=30s", "RestartSec=soon"),
        (check.RELAY_SERVICE, "ProtectClock=yes", "ProtectClok=yes"),
    ],
)
def test_systemd_analyze_refuses_what_systemd_would_ignore(
    tmp_path: Path, rel: str, old: str, new: str
) -> None:
    contrib = _mutated(tmp_path, rel, old, new)
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None
    with pytest.raises(check.CheckError, match="systemd-analyze"):
        check.systemd_analyze_verify(contrib, analyze)


# -- the crontab line end to end ---------------------------------------------------------


def syncengine(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "syncengine"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def run_cron_line(command: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """As cron does: ``/bin/sh -c`` with nothing of this process's environment."""
    env_i = ["env", "-i", f"PATH={BIN}:/usr/bin:/bin", f"HOME={home}"]
    return subprocess.run(
        [*env_i, "/bin/sh", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_crontab_line_syncs_two_machines_from_a_minimal_environment(tmp_path: Path) -> None:
    cron_text = (CONTRIB / check.CRON).read_text()
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    with running_relay(tmp_path / "relay.db", "--no-access-log") as relay:
        team = provision(relay.db, tmp_path, ("alice", "bob"))
        machines = {}
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            store = tmp_path / name / "store.db"
            token = issue_token(relay.db, team["team_id"])
            connected = syncengine(
                "connect", "--store", str(store), "--endpoint", relay.base_url,
                "--token", "-", "--team", "crew", "--security", "plaintext-allowed",
                stdin=token + "\n",
            )  # fmt: skip
            assert connected.returncode == 0, connected.stderr
            substitutions = {
                "@SYNCENGINE@": str(BIN / "syncengine"),
                "@STORE@": str(store),
                "@TEAM@": "crew",
                "@LOG@": str(tmp_path / name / "sync log"),  # a space: quoting holds
            }
            machines[name] = (store, check.cron_command(cron_text, substitutions))

        def send(name: str, sender: str, recipient: str, body: str) -> None:
            sent = syncengine("send", "crew", sender, recipient, "-", "--store",
                              str(machines[name][0]), stdin=body)  # fmt: skip
            assert sent.returncode == 0, sent.stderr

        send("a", "alice", "bob", "from a, one")
        send("a", "alice", "bob", "from a, two")
        send("b", "bob", "alice", "from b")
        for name in ("a", "b", "a"):
            ran = run_cron_line(machines[name][1], home, elsewhere)
            assert ran.returncode == 0, ran.stdout + ran.stderr
            assert ran.stdout == ran.stderr == ""  # everything went to the log

    logs = {name: (tmp_path / name / "sync log").read_text() for name in machines}
    assert logs["a"].count("exit 0") == 2 and "exit " not in logs["a"].replace("exit 0", "")
    assert logs["b"].count("exit 0") == 1 and "exit " not in logs["b"].replace("exit 0", "")
    assert "pushed 2 message(s): 2 stored" in logs["a"]
    assert "pushed 1 message(s): 1 stored" in logs["b"]
    assert "UTC" in logs["a"]  # the time stamp of each run

    def inbox(name: str, agent: str) -> list[str]:
        shown = syncengine("inbox", "crew", agent, "--json", "--store", str(machines[name][0]))
        assert shown.returncode == 0, shown.stderr
        return [json.loads(line)["body"] for line in shown.stdout.splitlines()]

    assert inbox("b", "bob") == ["from a, one", "from a, two"]
    assert inbox("a", "alice") == ["from b"]
    # the explicit --store was used: nothing at the default location or in cwd
    assert not (home / ".local").exists()
    assert list(elsewhere.iterdir()) == []
