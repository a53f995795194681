"""The main job on embedded defaults, as far as the product reaches today.

Seals a short conversation with every cipher profile this build supports,
shows exactly what the relay would be able to see of each envelope, and
opens each one again, proving the codec round trip end to end.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal


def _conversation() -> list[Message]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return [
        Message("Run the test suite", now, "leader", "worker-1"),
        Message("All 412 tests pass ✅", now, "worker-1", "leader"),
    ]


def main() -> int:
    binding = Binding(
        team_id="018f3f7e-0000-7000-8000-000000000001",
        wire_id="550e8400-e29b-41d4-a716-446655440000",
    )
    print("syncengine codec demo: seal -> what the relay sees -> open\n")
    for message in _conversation():
        envelope = seal(message, "none", SealParams(binding=binding))
        outcome = open_envelope(envelope, OpenContext(binding=binding))
        assert isinstance(outcome, Importable) and outcome.message == message
        print(f"{message.from_agent} -> {message.to_agent}: {message.body}")
        print(
            f"  relay sees: v={envelope.v} cipher={envelope.cipher} key_id={envelope.key_id} "
            f"blob={envelope.blob_size} bytes digest={envelope.digest().hex()[:16]}…"
        )
        print(f"  opened: {outcome.state}\n")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
