# shellcheck shell=bash
# syncengine storage driver for agmsg (driver-interface §2, with the §2.8
# stage1-sync, stage1-resync and stage2-read-state extensions).
#
# Source this file, then call the storage_* functions. Each one delegates to
# `syncengine driver <op>`, which owns the store, the framing and the status
# codes; this file only adapts calling conventions. Message bodies are piped
# on stdin, never placed on the child's argv. `syncengine driver path` prints
# where this file is installed.
#
# The per-message calls (send, list_unread, mark_read_batch, the read
# cursor, watch and history) are answered by a resident driver server when
# one runs for the store: the first call runs as a process and starts it,
# later ones reach it over loopback TCP from bash itself, one fork each
# (syncengine/cli/driver/server.py, specs/store.md §10). It exits when idle.
#
# Environment:
#   SYNCENGINE_BIN    the syncengine executable (default: the one installed
#                     beside this file, else `syncengine` on PATH)
#   SYNCENGINE_STORE  the store file (passed through to the command)
#   SYNCENGINE_DRIVER_SERVER       0 = every call runs as its own process
#   SYNCENGINE_DRIVER_SERVER_IDLE  seconds an idle server stays (default 30)
#
# Only storage_* names are defined (driver-interface §1.2); no set -e/-u here.

storage__syncengine_bin() {
    # The executable of the installation this file belongs to comes first,
    # so the file and the code it drives are always the same version.
    if [ -n "${SYNCENGINE_BIN:-}" ]; then
        command -v -- "$SYNCENGINE_BIN" 2>/dev/null
        return $?
    fi
    local here="${BASH_SOURCE[0]%/*}" near=""
    case "$here" in
        */lib/python*/site-packages/syncengine/drivers/storage)
            near="${here%/lib/python*}/bin/syncengine" ;;
        */syncengine/drivers/storage) near="${here%/syncengine/drivers/storage}/.venv/bin/syncengine" ;;
        */drivers/storage) near="${here%/drivers/storage}/.venv/bin/syncengine" ;;
    esac
    if [ -n "$near" ] && [ -x "$near" ]; then
        printf '%s\n' "$near"
        return 0
    fi
    command -v syncengine 2>/dev/null
}

storage__syncengine_missing() {
    # $1: "control" to end with the status line.
    # A source checkout's own set-up is the one command worth running for
    # it. An installed package (a wheel in a virtualenv) has no set-up script:
    # its syncengine executable sits in that environment's bin directory, so
    # the reason names that (or SYNCENGINE_BIN) instead of a checkout.
    local here="${BASH_SOURCE[0]%/*}" root="" commands='' reason
    case "$here" in
        */lib/python*/site-packages/syncengine/drivers/storage) root="" ;;
        */syncengine/drivers/storage) root="${here%/syncengine/drivers/storage}" ;;
        */drivers/storage) root="${here%/drivers/storage}" ;;
    esac
    if [ -n "$root" ] && [ -f "$root/scripts/setup.sh" ]; then
        commands="\"$(printf '%s' "bash '$root/scripts/setup.sh'" | sed 's/\\/\\\\/g; s/"/\\"/g')\""
        reason="the syncengine command was not found: run scripts/setup.sh in the syncengine source checkout, or set SYNCENGINE_BIN to its syncengine executable"
    else
        reason="the syncengine command was not found: install the syncengine wheel into a virtualenv with that environment's own pip, then set SYNCENGINE_BIN to its bin/syncengine, or put that bin directory on PATH"
    fi
    printf 'AGMSG-DIRECTIVE: {"type":"install_deps","driver":"syncengine","commands":[%s],"reason":"%s"}\n' \
        "$commands" "$reason"
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

storage__syncengine_rendezvous() {
    # Sets the caller's `rv` to where this store's server publishes itself
    # (the store path, resolved as syncengine resolves it, plus ".serve");
    # fails when the server is off or the path cannot be known without Python.
    [ "${SYNCENGINE_DRIVER_SERVER:-1}" != 0 ] && [ -z "${SYNCENGINE_CRASH_AT:-}" ] || return 1
    local store="${SYNCENGINE_STORE:-}" state="${XDG_STATE_HOME:-}"
    if [ -z "$store" ]; then
        case "$state" in
            /*) ;;
            *) [ -n "${HOME:-}" ] || return 1; state="$HOME/.local/state" ;;
        esac
        store="$state/syncengine/store.db"
    fi
    case "$store" in /*) ;; *) store="$PWD/$store" ;; esac
    rv="$store.serve"
}

storage__syncengine_serve() (
    # $1: control|record, $2: op, $3: the op's stdin, rest: op arguments.
    # Exit 200: no server took the call (nothing was sent; run it as a
    # process). A subshell, so SIGPIPE can be ignored without touching the
    # caller's traps and the connection closes with it.
    trap '' PIPE
    local port="" ctoken="" stoken="" pid="" greet="" fd="" rc="" err="" size="" out=""
    [ -O "$rv" ] || exit 200
    IFS=' ' read -r port ctoken stoken pid <"$rv" 2>/dev/null || exit 200
    case "$port" in '' | *[!0-9]*) exit 200 ;; esac
    [ -n "$stoken" ] || exit 200
    { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || exit 200
    # Mutual: the request goes only to a process that could read the 0600
    # rendezvous file (it answers the client token with the server token).
    printf '%s\n' "$ctoken" >&"$fd" 2>/dev/null || exit 200
    IFS= read -r -t 5 greet <&"$fd" || exit 200
    [ "$greet" = "$stoken" ] || exit 200
    if ! printf '%s\0' "$(($# - 1))" "${@:2}" >&"$fd" 2>/dev/null ||
        ! IFS= read -r -d '' rc <&"$fd" || ! IFS= read -r -d '' err <&"$fd" ||
        ! IFS= read -r -d '' size <&"$fd"; then
        # Handed over, then lost: running it again could apply it twice.
        printf 'syncengine storage driver: the driver server ended during %s (it may or may not have taken effect)\n' "$2" >&2
        [ "$1" = control ] && printf '%s\n' 'runtime_error'
        exit 13
    fi
    if [ "$size" -le 4096 ]; then
        IFS= read -r -d '' out <&"$fd"
        printf '%s' "$out"
    else
        cat <&"$fd"
    fi
    [ -z "$err" ] || printf '%s' "$err" >&2
    exit "$rc"
)

storage__syncengine_call() {
    # $1: control|record, $2: op, $3: the op's stdin, rest: op arguments.
    # Through the store's driver server when one answers, else as a process
    # that starts one (given the rendezvous path) for the next call.
    local kind="$1" op="$2" input="$3" rv="" code=0
    shift 3
    # A body of millions of characters goes through a process (no copy held here).
    if [ "${#input}" -le 4000000 ] && storage__syncengine_rendezvous; then
        # `|| code=$?`: a host running under `set -e` must not stop on the
        # "not served" answer.
        storage__syncengine_serve "$kind" "$op" "$input" "$@" || code=$?
        [ "$code" -eq 200 ] || return "$code"
    fi
    # An empty rendezvous (server off) asks the process for no server.
    printf '%s' "$input" |
        SYNCENGINE_DRIVER_RENDEZVOUS="$rv" storage__syncengine_run "$kind" "$op" "$@"
}

storage_check() { storage__syncengine_run control check "$@" </dev/null; }

storage_describe() {
    local bin
    if bin="$(storage__syncengine_bin)"; then
        "$bin" driver describe "$@" </dev/null
    else
        printf '%s\n' 'name=syncengine' 'description=syncengine command not found' 'capabilities='
    fi
    return 0
}

storage_init() { storage__syncengine_run control init "$@" </dev/null; }

storage_store_exists() { storage__syncengine_run plain store_exists "$@" </dev/null >/dev/null; }

storage_send() {
    # storage_send <team> <from> <to> <body>
    if [ "$#" -ne 4 ]; then
        printf '%s\n' 'usage: storage_send <team> <from> <to> <body>' >&2
        return 13
    fi
    storage__syncengine_call record send "$4" "$1" "$2" "$3"
}

storage_list_unread() { storage__syncengine_call record list_unread '' "$@"; }

storage_mark_read_batch() { storage__syncengine_call control mark_read_batch '' "$@"; }

storage_read_cursor_get() { storage__syncengine_call record read_cursor_get '' "$@"; }

storage_read_cursor_consume() {
    storage__syncengine_call control read_cursor_consume '' "$@"
}

storage_watch_tip() { storage__syncengine_call record watch_tip '' "$@"; }

storage_watch_after() { storage__syncengine_call record watch_after '' "$@"; }

storage_history() { storage__syncengine_call record history '' "$@"; }

# storage_export [<team>] <file>, storage_import [<team>] <file>: nothing on
# stdout, as the bundled drivers (outcome by exit code, message on stderr).
storage_export() { storage__syncengine_run plain export "$@" </dev/null; }

storage_import() { storage__syncengine_run plain import "$@" </dev/null; }

storage_compact() { storage__syncengine_run control compact "$@" </dev/null; }

# --- stage1-sync (driver-interface §2.8) ---------------------------------------
# <binding> is <local-team> <server-instance-id> <remote-team-id> <protocol-version>.
# JSONL on stdin and stdout; exit 0, 2 usage, 10 missing, 11 busy, 12 corrupt
# state, 13 check failed, 14 unsupported.

# storage_sync_prepare_push <binding> [<limit>]   stdin: one sync_prepare
storage_sync_prepare_push() { storage__syncengine_run sync prepare "$@"; }

# storage_sync_reconcile_push <binding>   stdin: sync_push_ack records
storage_sync_reconcile_push() { storage__syncengine_run sync reconcile "$@"; }

# storage_sync_apply_pull <binding>   stdin: sync_pull_message records, one sync_pull_cursor
storage_sync_apply_pull() { storage__syncengine_run sync apply "$@"; }

# storage_sync_reprocess <binding> [<limit> [<page-after>]]
storage_sync_reprocess() { storage__syncengine_run sync reprocess "$@" </dev/null; }

# --- stage1-resync (retention-gap-resynchronization.md) ------------------------

# storage_sync_resync_status <binding> [<accepted-floor>]   read-only
storage_sync_resync_status() { storage__syncengine_run sync resync-status "$@" </dev/null; }

# storage_sync_resync <binding>   stdin: one sync_resync
storage_sync_resync() { storage__syncengine_run sync resync "$@"; }

# --- stage2-read-state (read-state-synchronization.md) ------------------------

# storage_sync_prepare_read_state <binding>   stdin: one sync_read_context
storage_sync_prepare_read_state() { storage__syncengine_run sync read-prepare "$@"; }

# storage_sync_apply_read_state <binding>   stdin: one sync_read_snapshot, then items
storage_sync_apply_read_state() { storage__syncengine_run sync read-apply "$@"; }

# storage_sync_block_read_state <binding>   stdin: one sync_read_block
storage_sync_block_read_state() { storage__syncengine_run sync read-block "$@"; }

# storage_sync_unblock_read_state <binding>   stdin: one sync_read_unblock
storage_sync_unblock_read_state() { storage__syncengine_run sync read-unblock "$@"; }
