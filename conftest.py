"""Session-wide test environment.

The bash driver file starts a resident driver server for a store on its
first call (syncengine/cli/driver_server.py); across hundreds of throw-away
stores that would leave as many idle servers behind. Tests run every call
as its own process unless they turn the server on themselves (the driver
contract's "served" door, tests/syncengine/cli/test_driver_server.py).
"""

from __future__ import annotations

import os

os.environ["SYNCENGINE_DRIVER_SERVER"] = "0"
