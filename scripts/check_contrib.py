"""Validate the files in ``contrib/`` (systemd user units, crontab line, the relay's unit).

Usage: ``.venv/bin/python scripts/check_contrib.py [--contrib DIR] [--no-systemd-analyze]``

Two layers, both run when they can:

1. Structural checks, always: each unit's required sections and keys (``Type=``,
   ``TimeoutStartSec`` beyond the command's ``--deadline``, the timer's
   ``RandomizedDelaySec`` / ``Persistent``, ``Restart`` / ``KillSignal`` …; for
   the relay's system unit its sandboxing and a stop timeout beyond
   ``--shutdown-timeout``), and
   every ``ExecStart`` and the crontab command are parsed by the real
   ``syncengine`` argument parser (``syncengine.cli.build_parser``), so a
   renamed subcommand or option fails here, not at 3 a.m. in a journal.
2. ``systemd-analyze --user verify`` on instantiated copies of the user units, and
   ``systemd-analyze verify`` (system manager) on the relay's unit, when
   ``systemd-analyze`` is on PATH (any diagnostic about our files fails), with the
   executable pointed at the installed ``syncengine``.

Exit 0 when everything passes, 1 otherwise (each problem printed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SYNC_SERVICE = "systemd/syncengine-sync@.service"
SYNC_TIMER = "systemd/syncengine-sync@.timer"
RUN_SERVICE = "systemd/syncengine-run@.service"
RELAY_SERVICE = "systemd/syncengine-relay.service"
#: Where the relay unit expects syncengine: a virtualenv made for the service.
RELAY_EXECUTABLE = "/opt/syncengine/bin/syncengine"
ENV_EXAMPLE = "systemd/env.example"
CRON = "cron/syncengine.cron"
README = "README.md"

#: The instance name the checks instantiate the templates with.
CHECK_TEAM = "check-team"
#: The crontab placeholders, each to be replaced by the user.
CRON_PLACEHOLDERS = ("@SYNCENGINE@", "@STORE@", "@TEAM@", "@LOG@")
#: ``--deadline`` when the command line gives none (syncengine.engine.limits).
DEFAULT_DEADLINE = 900.0


class CheckError(Exception):
    pass


# -- systemd unit files ------------------------------------------------------------------


@dataclass
class Unit:
    name: str
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def one(self, section: str, key: str) -> str:
        values = [v for v in self.values(section, key) if v != ""]
        if len(values) != 1:
            raise CheckError(f"{self.name}: [{section}] needs exactly one {key}=, has {values}")
        return values[0]


def parse_unit(name: str, text: str) -> Unit:
    """systemd.syntax(7): sections, ``Key=Value``, ``#``/``;`` comments, ``\\``
    continuation lines."""
    unit = Unit(name)
    section: str | None = None
    logical: list[str] = []
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not logical and (not stripped or stripped[0] in "#;"):
            continue
        if stripped.endswith("\\"):
            logical.append(stripped[:-1])
            continue
        logical.append(stripped)
        lines.append((number, " ".join(logical)))
        logical = []
    if logical:
        raise CheckError(f"{name}: file ends inside a continued line")
    for number, line in lines:
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            if section in unit.sections:
                raise CheckError(f"{name}:{number}: section [{section}] appears twice")
            unit.sections[section] = []
            continue
        if section is None:
            raise CheckError(f"{name}:{number}: setting outside any section")
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key.strip()):
            raise CheckError(f"{name}:{number}: not a Key=Value line: {line!r}")
        unit.sections[section].append((key.strip(), value.strip()))
    return unit


_SPAN_UNITS = {
    "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip


def timespan_seconds(value: str) -> float:
    """systemd.time(7) time span: ``1200``, ``20min``, ``1h 30s``; ``infinity``."""
    if value == "infinity":
        return float("inf")
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", value)
    if not parts or re.sub(r"[\d.\s]|[a-z]", "", value):
        raise CheckError(f"not a time span: {value!r}")
    total = 0.0
    for number, unit in parts:
        if unit not in _SPAN_UNITS:
            raise CheckError(f"unknown time unit {unit!r} in {value!r}")
        total += float(number) * _SPAN_UNITS[unit]
    return total


def expand_specifiers(word: str, instance: str) -> str:
    """The specifiers our units use (systemd.unit(7) "Specifiers")."""
    home = str(Path.home())
    table = {
        "%I": instance,
        "%i": instance,
        "%h": home,
        "%E": os.environ.get("XDG_CONFIG_HOME") or f"{home}/.config",
        "%%": "%",
    }
    out = re.sub(r"%.", lambda m: table.get(m.group(0), m.group(0)), word)
    if re.search(r"%[^%]", out):
        raise CheckError(f"unsupported specifier in {word!r}")
    return out


def exec_argv(value: str, instance: str) -> list[str]:
    """An ``ExecStart=`` value as the argv systemd would run (prefixes dropped)."""
    value = value.lstrip("-@:+!")
    if "$" in value:
        raise CheckError(f"ExecStart uses environment expansion, keep it literal: {value!r}")
    return [expand_specifiers(w, instance) for w in shlex.split(value)]


# -- the real CLI ------------------------------------------------------------------------


def parse_cli(argv: list[str], where: str) -> argparse.Namespace:
    """Parse ``argv`` (after the executable) with the real ``syncengine`` parser."""
    from syncengine.cli import build_parser

    if any(a in ("-h", "--help") for a in argv):
        raise CheckError(f"{where}: --help on a scheduled command line")
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(errors):
            return build_parser().parse_args(argv)
    except SystemExit as exc:
        detail = errors.getvalue().strip().splitlines()
        raise CheckError(
            f"{where}: the syncengine CLI rejects {shlex.join(argv)!r} (exit {exc.code}): "
            + (detail[-1] if detail else "")
        ) from None


def check_syncengine_argv(argv: list[str], where: str, command: str) -> argparse.Namespace:
    if not argv or Path(argv[0]).name != "syncengine":
        raise CheckError(f"{where}: the command is not a syncengine executable: {argv[:1]}")
    if not Path(argv[0]).is_absolute():
        raise CheckError(f"{where}: the executable path must be absolute: {argv[0]!r}")
    args = parse_cli(argv[1:], where)
    if args.command != command:
        raise CheckError(f"{where}: runs 'syncengine {args.command}', expected {command!r}")
    return args


# -- per-file checks ---------------------------------------------------------------------


def _load_unit(contrib: Path, rel: str) -> Unit:
    path = contrib / rel
    if not path.is_file():
        raise CheckError(f"missing {rel}")
    return parse_unit(rel, path.read_text(encoding="utf-8"))


def _check_environment_files(unit: Unit) -> None:
    files = unit.values("Service", "EnvironmentFile")
    if not files:
        raise CheckError(f"{unit.name}: no EnvironmentFile= (the store comes from it)")
    for value in files:
        if not value.startswith("-"):
            raise CheckError(f"{unit.name}: EnvironmentFile={value} must be optional ('-')")


def check_sync_service(contrib: Path) -> str:
    unit = _load_unit(contrib, SYNC_SERVICE)
    unit.one("Unit", "Description")
    if unit.one("Service", "Type") != "oneshot":
        raise CheckError(f"{unit.name}: Type= must be oneshot")
    _check_environment_files(unit)
    argv = exec_argv(unit.one("Service", "ExecStart"), CHECK_TEAM)
    args = check_syncengine_argv(argv, unit.name, "sync")
    if args.team != CHECK_TEAM:
        raise CheckError(f"{unit.name}: ExecStart must pass --team %I (the instance)")
    deadline = args.deadline or DEFAULT_DEADLINE
    timeout = timespan_seconds(unit.one("Service", "TimeoutStartSec"))
    if not timeout > deadline + 30:
        raise CheckError(
            f"{unit.name}: TimeoutStartSec ({timeout:g} s) must exceed --deadline "
            f"({deadline:g} s) with a margin, so the command's own deadline ends it"
        )
    if "Install" in unit.sections:
        raise CheckError(f"{unit.name}: started by its timer; it needs no [Install]")
    return f"sync --team %I --deadline {deadline:g}, TimeoutStartSec {timeout:g} s"


def check_sync_timer(contrib: Path) -> str:
    unit = _load_unit(contrib, SYNC_TIMER)
    unit.one("Unit", "Description")
    calendar = unit.one("Timer", "OnCalendar")
    delay = timespan_seconds(unit.one("Timer", "RandomizedDelaySec"))
    if not delay > 0:
        raise CheckError(f"{unit.name}: RandomizedDelaySec must be positive")
    if unit.one("Timer", "Persistent") not in ("true", "yes", "1", "on"):
        raise CheckError(f"{unit.name}: Persistent= must be true")
    for target in unit.values("Timer", "Unit"):
        if target != "syncengine-sync@%i.service":
            raise CheckError(f"{unit.name}: Unit={target} is not syncengine-sync@%i.service")
    if "timers.target" not in " ".join(unit.values("Install", "WantedBy")).split():
        raise CheckError(f"{unit.name}: [Install] WantedBy=timers.target missing")
    return f"OnCalendar={calendar}, RandomizedDelaySec {delay:g} s, Persistent"


def check_run_service(contrib: Path) -> str:
    unit = _load_unit(contrib, RUN_SERVICE)
    unit.one("Unit", "Description")
    if unit.one("Service", "Type") not in ("simple", "exec"):
        raise CheckError(f"{unit.name}: Type= must be simple or exec (a long-lived process)")
    _check_environment_files(unit)
    argv = exec_argv(unit.one("Service", "ExecStart"), CHECK_TEAM)
    args = check_syncengine_argv(argv, unit.name, "run")
    if args.team != CHECK_TEAM:
        raise CheckError(f"{unit.name}: ExecStart must pass --team %I (the instance)")
    if args.store is not None:
        raise CheckError(f"{unit.name}: the store comes from the environment, not --store")
    if unit.one("Service", "Restart") != "on-failure":
        raise CheckError(f"{unit.name}: Restart= must be on-failure")
    if unit.one("Service", "KillSignal") not in ("SIGTERM", "TERM", "15"):
        raise CheckError(f"{unit.name}: KillSignal= must be SIGTERM (run exits 0 on it)")
    if "default.target" not in " ".join(unit.values("Install", "WantedBy")).split():
        raise CheckError(f"{unit.name}: [Install] WantedBy=default.target missing")
    return "run --team %I, Restart=on-failure, KillSignal=SIGTERM"


#: Sandboxing the relay unit must keep, with the values that count as kept.
RELAY_SANDBOX = {
    "NoNewPrivileges": ("yes", "true", "1", "on"),
    "ProtectSystem": ("strict",),
    "ProtectHome": ("yes", "true", "read-only", "tmpfs"),
    "PrivateTmp": ("yes", "true", "1", "on"),
    "PrivateDevices": ("yes", "true", "1", "on"),
}


def check_relay_service(contrib: Path) -> str:
    unit = _load_unit(contrib, RELAY_SERVICE)
    unit.one("Unit", "Description")
    if unit.one("Service", "Type") not in ("simple", "exec"):
        raise CheckError(f"{unit.name}: Type= must be simple or exec (a long-lived process)")
    value = unit.one("Service", "ExecStart")
    if not value.startswith(RELAY_EXECUTABLE + " "):
        raise CheckError(f"{unit.name}: ExecStart should run {RELAY_EXECUTABLE}")
    args = check_syncengine_argv(exec_argv(value, ""), unit.name, "relay")
    if args.relay_action != "serve":
        raise CheckError(f"{unit.name}: runs 'relay {args.relay_action}', expected 'relay serve'")
    if args.database is not None and str(args.database).startswith("postgres"):
        raise CheckError(
            f"{unit.name}: a PostgreSQL URL may hold a password; put it in the "
            "EnvironmentFile as SYNCENGINE_RELAY_DATABASE, not on ExecStart"
        )
    for key, accepted in RELAY_SANDBOX.items():
        if unit.one("Service", key) not in accepted:
            raise CheckError(f"{unit.name}: {key}= must be one of {', '.join(accepted)}")
    dynamic = unit.values("Service", "DynamicUser") in (["yes"], ["true"])
    user = unit.values("Service", "User")
    if not dynamic and (not user or user[-1] in ("", "root", "0")):
        raise CheckError(f"{unit.name}: run as DynamicUser=yes or a dedicated User=, not root")
    if unit.values("Service", "CapabilityBoundingSet") != [""]:
        raise CheckError(f"{unit.name}: CapabilityBoundingSet= must be empty (no capabilities)")
    state = unit.one("Service", "StateDirectory")
    if unit.one("Service", "KillSignal") not in ("SIGTERM", "TERM", "15"):
        raise CheckError(f"{unit.name}: KillSignal= must be SIGTERM (serve drains on it)")
    stop = timespan_seconds(unit.one("Service", "TimeoutStopSec"))
    if not stop > args.shutdown_timeout + 5:
        raise CheckError(
            f"{unit.name}: TimeoutStopSec ({stop:g} s) must exceed --shutdown-timeout "
            f"({args.shutdown_timeout} s) with a margin, so in-flight requests can finish"
        )
    if unit.one("Service", "Restart") != "on-failure":
        raise CheckError(f"{unit.name}: Restart= must be on-failure")
    if "multi-user.target" not in " ".join(unit.values("Install", "WantedBy")).split():
        raise CheckError(f"{unit.name}: [Install] WantedBy=multi-user.target missing")
    return (
        f"relay serve, StateDirectory={state}, ProtectSystem=strict, "
        f"--shutdown-timeout {args.shutdown_timeout} < TimeoutStopSec {stop:g} s"
    )


def check_env_example(contrib: Path) -> str:
    path = contrib / ENV_EXAMPLE
    if not path.is_file():
        raise CheckError(f"missing {ENV_EXAMPLE}")
    seen = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(\S+)", line)
        if not match:
            raise CheckError(f"{ENV_EXAMPLE}:{number}: not KEY=VALUE: {line!r}")
        seen[match.group(1)] = match.group(2)
    store = seen.get("SYNCENGINE_STORE")
    if store is None or not store.startswith("/"):
        raise CheckError(f"{ENV_EXAMPLE}: needs SYNCENGINE_STORE=<absolute path>")
    return "SYNCENGINE_STORE=" + store


# -- crontab -----------------------------------------------------------------------------

_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31),
                ("month", 1, 12), ("day of week", 0, 7))  # fmt: skip
_JOB = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S.*?)\s*$")


def _check_cron_field(text: str, name: str, low: int, high: int) -> None:
    for item in text.split(","):
        base, _, step = item.partition("/")
        if step and not (step.isdigit() and int(step) > 0):
            raise CheckError(f"crontab {name} field {text!r}: bad step")
        if base == "*":
            continue
        bounds = base.split("-")
        if len(bounds) > 2 or not all(b.isdigit() for b in bounds):
            raise CheckError(f"crontab {name} field {text!r}: not a number, range or *")
        numbers = [int(b) for b in bounds]
        if not all(low <= n <= high for n in numbers) or numbers != sorted(numbers):
            raise CheckError(f"crontab {name} field {text!r}: outside {low}..{high}")


def cron_job(text: str) -> tuple[list[str], str]:
    """The one job line of a crontab: its five schedule fields and its command."""
    jobs = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*\s*=", stripped):
            continue  # an environment setting
        match = _JOB.match(line)
        if not match:
            raise CheckError(f"crontab line is not 'm h dom mon dow command': {line!r}")
        jobs.append((list(match.groups()[:5]), match.group(6)))
    if len(jobs) != 1:
        raise CheckError(f"the crontab must hold exactly one job line, found {len(jobs)}")
    return jobs[0]


def cron_command(text: str, substitutions: dict[str, str]) -> str:
    """The crontab job's command with every placeholder replaced (each once, by
    a shell-quoted value): the exact command cron hands to ``/bin/sh -c``."""
    _, command = cron_job(text)
    if missing := set(CRON_PLACEHOLDERS) ^ set(substitutions):
        raise CheckError(f"placeholders to substitute: {sorted(missing)}")
    for placeholder, value in substitutions.items():
        command = command.replace(placeholder, shlex.quote(value))
    return command


def _syncengine_words(command: str) -> tuple[list[str], list[str]]:
    """The ``syncengine`` invocation inside a shell command, and all its words."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    starts = [i for i, w in enumerate(words) if Path(w).name in ("syncengine", "@SYNCENGINE@")]
    if len(starts) != 1:
        raise CheckError(f"the cron command must run syncengine once: {command!r}")
    argv = []
    for i, word in enumerate(words[starts[0] :], starts[0]):
        end_of_command = word == "}" or not word.strip("();<>|&")
        redirection = word.isdigit() and words[i + 1 : i + 2] in ([">"], [">>"], [">&"], ["<"])
        if end_of_command or redirection:
            break
        argv.append(word)
    return argv, words


def check_cron(contrib: Path) -> str:
    path = contrib / CRON
    if not path.is_file():
        raise CheckError(f"missing {CRON}")
    text = path.read_text(encoding="utf-8")
    fields, command = cron_job(text)
    for value, (name, low, high) in zip(fields, _CRON_FIELDS, strict=True):
        _check_cron_field(value, name, low, high)
    if re.search(r"(?<!\\)%", command):
        raise CheckError("the cron command has an unescaped % (cron makes it a newline)")
    for placeholder in CRON_PLACEHOLDERS:
        if placeholder not in command:
            raise CheckError(f"the cron command lacks the placeholder {placeholder}")
    argv, words = _syncengine_words(command)
    if argv[0] != "@SYNCENGINE@":
        raise CheckError("the cron command must start syncengine as @SYNCENGINE@ (absolute)")
    args = parse_cli(argv[1:], "crontab")
    if args.command != "sync":
        raise CheckError(f"crontab: runs 'syncengine {args.command}', expected 'sync'")
    if args.store != "@STORE@" or args.team != "@TEAM@":
        raise CheckError("crontab: sync needs --store @STORE@ --team @TEAM@ (cron has no env)")
    deadline = args.deadline or DEFAULT_DEADLINE
    if deadline >= 300:
        raise CheckError(f"crontab: --deadline {deadline:g} s must end before the next run")
    if ">>" not in words or words[words.index(">>") + 1] != "@LOG@":
        raise CheckError("crontab: output must be appended to @LOG@ (>> @LOG@)")
    if "2>&1" not in command:
        raise CheckError("crontab: standard error must go to the log too (2>&1)")
    return f"{' '.join(fields)}: {shlex.join(argv)} >> @LOG@"


def check_readme(contrib: Path) -> str:
    path = contrib / README
    if not path.is_file():
        raise CheckError(f"missing {README}")
    text = path.read_text(encoding="utf-8")
    documented = (SYNC_SERVICE, SYNC_TIMER, RUN_SERVICE, RELAY_SERVICE, ENV_EXAMPLE, CRON)
    names = [Path(rel).name for rel in documented]
    names += ["loginctl enable-linger", "systemctl --user enable --now"]
    for name in names:
        if name not in text:
            raise CheckError(f"{README} does not mention {name}")
    for code in "345678":
        if not re.search(rf"^\|\s*{code}\s*\|", text, re.MULTILINE):
            raise CheckError(f"{README}: the exit-code table lacks exit {code}")
    return "documents every file and exit codes 3-8"


# -- systemd-analyze ---------------------------------------------------------------------


def installed_syncengine() -> str:
    beside = Path(sys.executable).parent / "syncengine"
    found = str(beside) if beside.is_file() else shutil.which("syncengine")
    if not found:
        raise CheckError("no syncengine executable to point the units at (pip install -e .)")
    return found


def systemd_analyze_verify(contrib: Path, analyze: str) -> str:
    """``systemd-analyze --user verify`` on instances of the three templates, in a
    scratch directory, with ``%h/.local/bin/syncengine`` pointed at the installed
    executable (verify checks it exists). Any diagnostic naming one of the files
    is a failure: verify reports unknown keys and bad values only as warnings."""
    executable = installed_syncengine()
    with tempfile.TemporaryDirectory(prefix="check-contrib-") as scratch:
        root = Path(scratch)
        units = root / "units"
        runtime = root / "runtime"
        units.mkdir()
        runtime.mkdir(mode=0o700)
        paths = []
        for rel in (SYNC_SERVICE, SYNC_TIMER, RUN_SERVICE):
            text = (contrib / rel).read_text(encoding="utf-8")
            if rel.endswith(".service") and "%h/.local/bin/syncengine" not in text:
                raise CheckError(f"{rel}: ExecStart should be %h/.local/bin/syncengine")
            text = text.replace("%h/.local/bin/syncengine", executable)
            name = Path(rel).name.replace("@.", f"@{CHECK_TEAM}.")
            (units / name).write_text(text, encoding="utf-8")
            paths.append(str(units / name))
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"}
        mode = ["--user"]
        result = _run_analyze(analyze, mode, paths, env)
        if "Failed to initialize manager" in result.stdout + result.stderr:
            mode = []  # no user manager possible here: the system manager's rules
            result = _run_analyze(analyze, mode, paths, env)
        output = (result.stdout + result.stderr).strip()
        ours = [
            line
            for line in output.splitlines()
            if any(Path(p).name in line for p in paths) or line.startswith(str(units))
        ]
        if result.returncode != 0 or ours:
            raise CheckError(
                f"systemd-analyze {' '.join(mode)} verify (exit {result.returncode}):\n  "
                + "\n  ".join(ours or output.splitlines())
            )
        _verify_relay_unit(contrib, analyze, units, executable, env)
    version = subprocess.run(
        [analyze, "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n", 1)[0]
    return f"{' '.join(mode) or '--system'} verify clean, relay unit --system clean ({version})"


def _verify_relay_unit(
    contrib: Path, analyze: str, units: Path, executable: str, env: dict[str, str]
) -> None:
    """The relay's unit is a system service: verify it under the system manager's rules."""
    text = (contrib / RELAY_SERVICE).read_text(encoding="utf-8")
    if RELAY_EXECUTABLE not in text:
        raise CheckError(f"{RELAY_SERVICE}: ExecStart should be {RELAY_EXECUTABLE}")
    path = units / Path(RELAY_SERVICE).name
    path.write_text(text.replace(RELAY_EXECUTABLE, executable), encoding="utf-8")
    result = _run_analyze(analyze, [], [str(path)], env)
    output = (result.stdout + result.stderr).strip()
    ours = [line for line in output.splitlines() if path.name in line or str(units) in line]
    if result.returncode != 0 or ours:
        raise CheckError(
            f"systemd-analyze verify {RELAY_SERVICE} (exit {result.returncode}):\n  "
            + "\n  ".join(ours or output.splitlines())
        )


def _run_analyze(
    analyze: str, mode: list[str], paths: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [analyze, *mode, "--man=no", "--generators=no", "verify", *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


# -- main --------------------------------------------------------------------------------


def run_checks(contrib: Path, *, use_systemd_analyze: bool = True) -> list[tuple[str, str, bool]]:
    """Every check as ``(name, detail, passed)``."""
    checks = [
        (SYNC_SERVICE, check_sync_service),
        (SYNC_TIMER, check_sync_timer),
        (RUN_SERVICE, check_run_service),
        (RELAY_SERVICE, check_relay_service),
        (ENV_EXAMPLE, check_env_example),
        (CRON, check_cron),
        (README, check_readme),
    ]
    results = []
    for name, check in checks:
        try:
            results.append((name, check(contrib), True))
        except CheckError as exc:
            results.append((name, str(exc), False))
    analyze = shutil.which("systemd-analyze") if use_systemd_analyze else None
    if analyze is None:
        why = "not available" if use_systemd_analyze else "skipped (--no-systemd-analyze)"
        results.append(("systemd-analyze", f"{why}: structural checks only", True))
    else:
        try:
            results.append(("systemd-analyze", systemd_analyze_verify(contrib, analyze), True))
        except CheckError as exc:
            results.append(("systemd-analyze", str(exc), False))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contrib", type=Path, default=REPO / "contrib", metavar="DIR")
    parser.add_argument("--no-systemd-analyze", action="store_true")
    args = parser.parse_args(argv)
    results = run_checks(args.contrib, use_systemd_analyze=not args.no_systemd_analyze)
    for name, detail, passed in results:
        print(f"{'ok  ' if passed else 'FAIL'} {name}: {detail}")
    return 0 if all(passed for _, _, passed in results) else 1


if __name__ == "__main__":
    sys.exit(main())
