#!/usr/bin/env bash
# The main job on embedded defaults: two machines exchange end-to-end
# encrypted messages through a relay started on 127.0.0.1, every step a real
# `syncengine` command (see syncengine/demo.py). `--keep` keeps the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
python -m syncengine.demo "$@"
