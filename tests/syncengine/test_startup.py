"""Start-up stays cheap: httpx's optional CLI (click, rich) is never imported."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_http_client_does_not_load_httpx_cli_dependencies():
    code = (
        "import sys, syncengine.http.client\n"
        "loaded = sorted(m for m in ('click', 'rich', 'pygments') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
        "assert 'httpx' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
