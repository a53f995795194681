# shellcheck shell=bash
# A stand-in for the per-call work of agmsg's bundled sqlite3-CLI storage
# driver, for bench/bench_driver.py (issue #11: "a host's sequence of 1,000
# sends plus reads no slower than with the bundled driver").
#
# Not the bundled driver (its code is not ours and is not copied here): our
# own few lines that pay what each of its calls pays, as recorded from the
# upstream driver's structure:
#   send  a UUIDv7 from `date` and 10 bytes of /dev/urandom through
#         `head | od | tr`, a timestamp from `date`, the SQL literals built in
#         command substitutions, and one `sqlite3 -bail` process running a
#         BEGIN IMMEDIATE transaction that inserts the legacy `messages` row
#         and the `message_sent` event;
#   list  one `sqlite3` process running a JSON-object query over the event
#         log: sent to the agent, with no read event for it.
# It does less than the bundled driver (no busy-timeout wrapper, no
# first-write fallback, no host around it), so it is a lower bound of the
# bundled driver's cost per call.
#
# Environment: STANDIN_DB, the database file (created by standin_init).

standin_init() {
    sqlite3 -bail "$STANDIN_DB" >/dev/null <<'SQL'
PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, team TEXT NOT NULL, from_agent TEXT NOT NULL,
    to_agent TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL, read_at TEXT);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL, id TEXT NOT NULL, team TEXT,
    from_agent TEXT, to_agent TEXT, body TEXT, msg_id TEXT, agent TEXT, at TEXT NOT NULL,
    legacy_id INTEGER);
CREATE INDEX IF NOT EXISTS events_sent ON events(type, team, to_agent, seq);
CREATE INDEX IF NOT EXISTS events_read ON events(type, team, agent, msg_id);
SQL
}

standin_uuid7() {
    local ms hex rnd
    ms=$(($(date -u +%s) * 1000))
    hex=$(printf '%012x' "$ms")
    rnd=$(head -c 10 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s-%s-7%s-8%s-%s\n' "${hex:0:8}" "${hex:8:4}" "${rnd:0:3}" "${rnd:3:3}" "${rnd:6:12}"
}

standin_now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

standin_quote() {
    local q="'"
    printf '%s' "${1//$q/$q$q}"
}

standin_send_sql() {
    local team from to body id at
    team="$(standin_quote "$1")"; from="$(standin_quote "$2")"; to="$(standin_quote "$3")"
    body="$(standin_quote "$4")"; id="$(standin_quote "$5")"; at="$(standin_quote "$6")"
    printf '%s\n' "BEGIN IMMEDIATE;" \
        "INSERT INTO messages (team, from_agent, to_agent, body, created_at)" \
        "  VALUES ('$team', '$from', '$to', '$body', '$at');" \
        "INSERT INTO events (type, id, team, from_agent, to_agent, body, at, legacy_id)" \
        "  VALUES ('message_sent', '$id', '$team', '$from', '$to', '$body', '$at'," \
        "          last_insert_rowid());" \
        "COMMIT;"
}

# standin_send <team> <from> <to> <body>: prints the new message's id.
standin_send() {
    local id at sql
    id="$(standin_uuid7)"
    at="$(standin_now)"
    sql="$(standin_send_sql "$1" "$2" "$3" "$4" "$id" "$at")"
    printf '%s\n' "$sql" | sqlite3 -bail "$STANDIN_DB" >/dev/null || return 1
    printf '%s\n' "$id"
}

# standin_list_unread <team> <agent> [--limit N]: one JSON object per line.
standin_list_unread() {
    local team agent limit=100
    team="$(standin_quote "$1")"; agent="$(standin_quote "$2")"
    [ "${3:-}" = --limit ] && limit="$4"
    sqlite3 "$STANDIN_DB" "
        SELECT json_object('id', e.id, 'team', e.team, 'from', e.from_agent,
                           'to', e.to_agent, 'body', e.body, 'at', e.at)
        FROM events e
        WHERE e.type = 'message_sent' AND e.team = '$team' AND e.to_agent = '$agent'
          AND NOT EXISTS (SELECT 1 FROM events r WHERE r.type = 'message_read'
                          AND r.team = e.team AND r.agent = e.to_agent AND r.msg_id = e.id)
        ORDER BY e.seq LIMIT $limit;"
}
