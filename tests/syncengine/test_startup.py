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


def test_the_httpx_cli_stand_in_refuses_to_run():
    import pytest

    import syncengine  # noqa: F401  (registers the stand-in if httpx was not loaded yet)

    stand_in = sys.modules.get("httpx._main")
    if stand_in is None or not hasattr(stand_in, "main") or stand_in.__spec__ is not None:
        pytest.skip("httpx was imported before syncengine in this test process")
    with pytest.raises(SystemExit):
        stand_in.main()
