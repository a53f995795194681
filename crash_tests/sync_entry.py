"""Subprocess entry for the sync crash tests.

``python -m crash_tests.sync_entry <capture-file> driver …`` runs the real
``syncengine driver`` command, after wrapping ``syncengine.ids.new_uuid4``
so every wire ID minted — including private ones a crash abandons — is
appended to the capture file before it is used (the upstream capture-fixture
technique, UPSTREAM-RECORDS §7.1). ``bind`` / ``retire`` drive the binding
transitions through the Python API. The crash itself comes from
``SYNCENGINE_CRASH_AT`` in the environment.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    capture, command, *rest = argv
    from syncengine import ids

    original = ids.new_uuid4

    def recording() -> str:
        value = original()
        with open(capture, "a", encoding="ascii") as out:
            out.write(value + "\n")
            out.flush()
            os.fsync(out.fileno())
        return value

    ids.new_uuid4 = recording
    if command == "driver":
        from syncengine.cli import main as cli_main

        return cli_main(["driver", *rest])
    from syncengine.local_store import Store
    from syncengine.ops.bindings import BindingKey

    store_path, *binding = rest
    key = BindingKey.from_argv(binding[:4])
    with Store(store_path) as store:
        if command == "bind":
            store.sync_bind(key)
        elif command == "retire":
            store.sync_retire_binding(key, int(binding[4]))
        else:
            raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
