#!/usr/bin/env bash
# The main job on embedded defaults. Until the engine lands this runs the
# codec demo: seal a message, show what the relay can see, open it again.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
python -m syncengine.demo "$@"
