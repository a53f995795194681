"""The ``syncengine`` command line.

Each command group lives in its own module exposing ``register(subparsers)``.
Start-up cost matters (``syncengine pull`` runs on a schedule and the bash
driver spawns one process per storage operation), so :func:`main` imports
only the module of the command actually invoked, and that module builds
only the invoked command's parser (:class:`_OnlyCommand`: the sibling
commands it registers are discarded unbuilt); ``--help`` and unknown
commands build them all. A handler returns the process exit code.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from syncengine import __version__
from syncengine._startup import PostponedCollection

if TYPE_CHECKING:
    import argparse

# Command name -> module registering it, in the order their help appears.
COMMANDS: dict[str, str] = {
    "envelope": "syncengine.cli.envelope",
    "driver": "syncengine.cli.driver.command",
    "team": "syncengine.cli.team",
    "keys": "syncengine.cli.keys",
    "relay": "syncengine.cli.relay",
    "connect": "syncengine.cli.engine_commands",
    "push": "syncengine.cli.engine_commands",
    "pull": "syncengine.cli.engine_commands",
    "sync": "syncengine.cli.engine_commands",
    "run": "syncengine.cli.engine_commands",
    "status": "syncengine.cli.engine_commands",
    "resync": "syncengine.cli.engine_commands",
    "resume": "syncengine.cli.engine_commands",
    "reprocess": "syncengine.cli.engine_commands",
    "read-state": "syncengine.cli.engine_commands",
    "quarantine": "syncengine.cli.engine_commands",
    "doctor": "syncengine.cli.engine_commands",
    "disconnect": "syncengine.cli.engine_commands",
    "backup": "syncengine.cli.backup",
    "restore": "syncengine.cli.backup",
    "seed": "syncengine.cli.backup",
    "security": "syncengine.cli.engine_commands",
    "send": "syncengine.cli.messages",
    "inbox": "syncengine.cli.messages",
    "history": "syncengine.cli.messages",
    "wait": "syncengine.cli.wait",
}
#: Exit codes of each command module, shown by every ``--help`` of its
#: commands that has none of its own (issue #18: a test walks the whole tree).
_STORE_CODES = (
    "exit codes: 0 ok   2 usage   10 missing dependency   12 corrupt store   "
    "13 runtime error (unknown team or agent, bad input)"
)
MODULE_EXIT_CODES: dict[str, str] = {
    "syncengine.cli.envelope": "exit codes: 0 ok   1 the envelope is blocked (its outcome is "
    "printed)   2 invalid input   3 cannot seal",
    "syncengine.cli.driver.command": "exit codes (driver-interface): 0 ok   2 usage   "
    "10 missing_deps   11 busy   12 corrupt_state   13 runtime_error / check failed   "
    "14 unsupported",
    "syncengine.cli.team": _STORE_CODES,
    "syncengine.cli.messages": _STORE_CODES,
    "syncengine.cli.keys": "exit codes: 0 ok   2 refused (the reason is printed)",
    "syncengine.cli.relay": "exit codes: 0 ok   2 operator error (the remedy is printed)   "
    "3 database unavailable or busy",
}

#: The engine commands' exit codes (connect … resync), shown by ``--help``.
EXIT_CODES_EPILOG = """\
exit codes of connect, push, pull, sync, run, status, resync, resume, reprocess, security:
  0 ok   2 usage   3 transient (try again)   4 refused by the relay, or a resync
  approval that does not hold   5 resync required: run 'syncengine status' for the
  exact 'syncengine resync' command   6 halted: verify the relay, then 'syncengine
  resume'   7 not connected / configuration
  8 another engine holds the binding   10/12/13 store errors (driver-interface)"""

# A module may register several commands; each is imported once.
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


def build_parser(
    modules: Iterable[str] = COMMAND_MODULES, *, only: str | None = None
) -> argparse.ArgumentParser:
    """The ``syncengine`` parser with the commands of ``modules``; with
    ``only``, just that command's parser is built (the same parser, help and
    exit codes as in the full tree), which is all a run of that command needs."""
    # start-up pin: a driver op loads no argparse
    import argparse

    parser = _parser_class()(
        prog="syncengine",
        description="Encrypted, crash-safe sync for local-first agent message stores.",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-V", "--version", action="store_true", help="print the version and exit")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log detail (-vv: debug)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="log errors only")
    parser.add_argument(
        "--log-format", choices=("text", "json"), default="text", help="log line format"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    registry: Any = subparsers if only is None else _OnlyCommand(subparsers, only)
    for name in modules:
        importlib.import_module(name).register(registry)
    _add_exit_codes(subparsers)
    return parser


def _parser_class() -> type[argparse.ArgumentParser]:
    """``ArgumentParser`` whose "invalid choice" error names the closest
    choice (``syncengine statsu``: "did you mean 'status'?"), for every
    command, sub-command and ``choices=`` option; Python 3.11 has no
    ``suggest_on_error``. Sub-parsers inherit the class."""
    # start-up pin: a driver op loads no argparse
    import argparse

    class SuggestingParser(argparse.ArgumentParser):
        def _check_value(self, action: argparse.Action, value: Any) -> None:
            choices = action.choices
            if choices is None or value in choices:
                return
            import difflib  # the error path only

            names = [str(choice) for choice in choices]
            close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listed = ", ".join(repr(name) for name in names)
            raise argparse.ArgumentError(
                action, f"invalid choice: {value!r}{hint}; choose from {listed}"
            )

    return SuggestingParser


class _OnlyCommand:
    """The sub-parser registry as a command module sees it, when one command
    runs: ``add_parser`` builds that command and hands back a
    :class:`_Discarded` for every other, so their arguments, sub-commands and
    help texts are never built (start-up cost, issue #17)."""

    def __init__(self, subparsers: Any, command: str) -> None:
        self._subparsers = subparsers
        self._command = command

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if name != self._command:
            return _DISCARDED
        return self._subparsers.add_parser(name, **kwargs)


class _Discarded:
    """Accepts whatever a ``register`` function does to a parser it built
    (``add_argument``, ``add_subparsers``, ``set_defaults``, attribute
    assignment …) and keeps none of it."""

    def __getattr__(self, name: str) -> Any:
        return self._ignore

    def __setattr__(self, name: str, value: object) -> None:
        pass

    def _ignore(self, *args: object, **kwargs: object) -> _Discarded:
        return self


_DISCARDED = _Discarded()


def _add_exit_codes(subparsers: Any) -> None:
    """Every command's help lists its exit codes: its own epilog, else its
    module's table (the engine's for the engine commands), inherited by its
    sub-commands."""
    for name, command in subparsers.choices.items():
        module = COMMANDS.get(name)
        codes = EXIT_CODES_EPILOG if module == "syncengine.cli.engine_commands" else None
        codes = MODULE_EXIT_CODES.get(module or "", codes)
        _inherit(command, codes)


def _inherit(parser: Any, codes: str | None) -> None:
    if not parser.epilog and codes:
        parser.epilog = codes
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for child in action.choices.values():
                _inherit(child, parser.epilog if "exit code" in (parser.epilog or "") else codes)


def _command_in(argv: Sequence[str]) -> str | None:
    """The invoked command, when it is unambiguous (global logging flags may
    come before it); ``None`` for help, an unknown command or none."""
    rest = list(argv)
    while rest and rest[0] in _GLOBAL_FLAGS:
        rest = rest[2:] if rest[0] == "--log-format" else rest[1:]
    first = rest[0] if rest else None
    return first if first in COMMANDS else None


def _modules_for(argv: Sequence[str]) -> tuple[str, ...]:
    """Only the invoked command's module, when the command is unambiguous."""
    command = _command_in(argv)
    return COMMAND_MODULES if command is None else (COMMANDS[command],)


_GLOBAL_FLAGS = frozenset({"-v", "-vv", "-vvv", "--verbose", "-q", "--quiet", "--log-format"})


#: Stop signals that arrived before ``run`` installed its own handlers
#: (``syncengine.cli.engine_commands._run`` reads it): ``run`` stops cleanly even when
#: SIGTERM comes during its start-up (issue #33: it was killed by the signal).
EARLY_STOPS: list[int] = []


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None and _command_in(args_list) == "run":
        _catch_stops_early()

    with PostponedCollection():
        return _main(args_list)


def _catch_stops_early() -> None:
    """The first thing a ``run`` process does: note SIGTERM/SIGINT instead of
    dying by them, before the parser and the engine are even imported (the
    interpreter's own start is the only time before this). A stop signal a
    supervisor held blocked until now is delivered here too."""
    # start-up pin: send loads no signal
    import signal

    def note(signum: int, frame: object) -> None:
        EARLY_STOPS.append(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, note)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})


def _main(args_list: list[str]) -> int:
    if args_list and args_list[0] == "driver":
        # A host's bash driver starts one process per storage call: the
        # driver's plain argv skips building an argparse parser at all.
        from syncengine.cli.driver.command import run_plain_argv

        plain = run_plain_argv(args_list[1:])
        if plain is not None:
            return plain
        if any(arg in ("-h", "--help") for arg in args_list[1:]):
            # An op's arguments would swallow ``--help`` (``driver export
            # --help`` once wrote a file named ``--help``): show the driver's help.
            args_list = ["driver", "--help"]
    if args_list in (["--version"], ["-V"]):
        print(f"syncengine {__version__}")
        return 0
    parser = build_parser(_modules_for(args_list), only=_command_in(args_list))
    args = parser.parse_args(args_list)
    # start-up pin: status --help loads no syncengine.cli.logsetup
    from syncengine.cli.logsetup import configured_logging, level_for

    try:
        with configured_logging(level_for(args.verbose, args.quiet), args.log_format):
            code: int = args.handler(args)
            sys.stdout.flush()
    except BrokenPipeError:
        return _broken_pipe()
    return code


def _broken_pipe() -> int:
    """The reader went away (``syncengine history | head``): stop quietly, as
    a Unix tool killed by SIGPIPE would (128 + 13), with no traceback — and
    point stdout at /dev/null so the interpreter's final flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
