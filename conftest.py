"""Session-wide test environment.

The bash driver file starts a resident driver server for a store on its
first call (syncengine/cli/driver/server.py); across hundreds of throw-away
stores that would leave as many idle servers behind. Tests run every call
as its own process unless they turn the server on themselves (the driver
contract's "served" door, tests/syncengine/cli/test_driver_server.py).
"""

from __future__ import annotations

import os

from hypothesis import settings

os.environ["SYNCENGINE_DRIVER_SERVER"] = "0"

# No property test's verdict may hang on wall-clock speed: Hypothesis fails an
# example that runs past its 200 ms default deadline, which a busy machine
# (load 10+ on 2 cores, as CI runs) reaches without any fault of the code.
# Every settings object built after this (the test modules' own included)
# inherits it; a test that cares about time says so itself.
settings.register_profile("syncengine", deadline=None)
settings.load_profile("syncengine")
