#!/usr/bin/env bash
# The whole test gate: lint, format, strict typing (the three packages, the benches, the
# crash tests and the tests — the tests under the profile pyproject.toml gives them),
# then every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
ruff check .
ruff format --check .
mypy --strict wire syncengine relay bench crash_tests tests
pytest "$@"
