# shellcheck shell=bash
# syncengine storage driver for agmsg (driver-interface §2).
#
# Source this file, then call the storage_* functions. Each one delegates to
# `syncengine driver <op>`, which owns the store, the framing and the status
# codes; this file only adapts calling conventions. Message bodies are piped
# on stdin, never placed on the child's argv.
#
# Environment:
#   SYNCENGINE_BIN    the syncengine executable (default: `syncengine` on PATH)
#   SYNCENGINE_STORE  the store file (passed through to the command)
#
# Only storage_* names are defined (driver-interface §1.2); no set -e/-u here.

storage__syncengine_bin() {
    local bin="${SYNCENGINE_BIN:-syncengine}"
    if command -v -- "$bin" >/dev/null 2>&1; then
        printf '%s\n' "$bin"
        return 0
    fi
    return 1
}

storage__syncengine_missing() {
    # $1: "control" to end with the status line.
    printf '%s\n' 'AGMSG-DIRECTIVE: {"type":"install_deps","driver":"syncengine","commands":["python3 -m pip install syncengine"],"reason":"the syncengine command was not found (set SYNCENGINE_BIN or put it on PATH)"}'
    if [ "$1" = control ]; then
        printf '%s\n' 'missing_deps'
    fi
    printf '%s\n' 'syncengine storage driver: syncengine command not found' >&2
    return 10
}

storage__syncengine_run() {
    # $1: control|record|plain, $2: op, rest: op arguments. stdin passes through.
    local kind="$1" bin
    shift
    bin="$(storage__syncengine_bin)" || { storage__syncengine_missing "$kind"; return $?; }
    "$bin" driver "$@"
}

storage_check() { storage__syncengine_run control check; }

storage_describe() {
    local bin
    if bin="$(storage__syncengine_bin)"; then
        "$bin" driver describe
    else
        printf '%s\n' 'name=syncengine' 'description=syncengine command not found' 'capabilities='
    fi
    return 0
}

storage_init() { storage__syncengine_run control init </dev/null; }

storage_store_exists() { storage__syncengine_run plain store_exists </dev/null >/dev/null; }

storage_send() {
    # storage_send <team> <from> <to> <body>
    if [ "$#" -ne 4 ]; then
        printf '%s\n' 'usage: storage_send <team> <from> <to> <body>' >&2
        return 13
    fi
    printf '%s' "$4" | storage__syncengine_run record send "$1" "$2" "$3"
}

storage_list_unread() { storage__syncengine_run record list_unread "$@" </dev/null; }

storage_mark_read_batch() { storage__syncengine_run control mark_read_batch "$@" </dev/null; }

storage_read_cursor_get() { storage__syncengine_run record read_cursor_get "$@" </dev/null; }

storage_read_cursor_consume() {
    storage__syncengine_run control read_cursor_consume "$@" </dev/null
}

storage_watch_tip() { storage__syncengine_run record watch_tip "$@" </dev/null; }

storage_watch_after() { storage__syncengine_run record watch_after "$@" </dev/null; }

storage_history() { storage__syncengine_run record history "$@" </dev/null; }

storage_export() { storage__syncengine_run control export "$@" </dev/null; }

storage_import() { storage__syncengine_run control import "$@" </dev/null; }

storage_compact() { storage__syncengine_run control compact </dev/null; }
