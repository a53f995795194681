#!/usr/bin/env bash
# Idempotent environment set-up: a project-local virtualenv with every
# runtime and test dependency, plus the system tools the tests use.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.syncengine-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    # An editable install in "compat" mode is one path line in a .pth file,
    # like a regular install's site-packages entry. The default mode's import
    # finder runs inside site.py at every interpreter start (about 12 ms here),
    # which every host call of the driver file and every scheduled run would pay.
    # setuptools calls "compat" transitional: should a later one refuse it,
    # the default editable mode is installed instead (correct, only slower).
    .venv/bin/python -m pip install -q -e '.[dev,relay,postgres]' \
        --config-settings editable_mode=compat 2>/dev/null \
        || .venv/bin/python -m pip install -q -e '.[dev,relay,postgres]'
    touch "$stamp"
fi
# The relay's contract tests run every relay test on PostgreSQL too, on a
# throw-away server they start from Debian's binaries (tests/relay/pg_server.py).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
            >/dev/null 2>&1 \
            || echo "setup: could not install PostgreSQL; its relay tests fail under CI" >&2
    else
        echo "setup: PostgreSQL binaries (initdb) not found; install the postgresql package" >&2
    fi
fi
# The standard `age` tool is used by the interoperability tests.
if ! command -v age >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq age) >/dev/null 2>&1 \
        || echo "setup: could not install the 'age' tool; its interop tests will be skipped" >&2
fi
