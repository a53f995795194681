"""The four doors a driver is reached through (in process, command, bash file, served),
named once for the fixtures that run every contract test through each and for the
contract test that checks the list."""

from __future__ import annotations

DOORS = ["python", "command", "bash", "served"]
