"""The main job on embedded defaults, as far as the product reaches today.

Seals a short conversation with each cipher profile (``none`` and ``age-v1``
to a freshly generated team identity), shows exactly what the relay would be
able to see of each envelope, and opens each one again under the trusted
binding, proving the codec round trip end to end.
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime

from wire.age_keys import X25519Identity
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal

TEAM_ID = "018f3f7e-0000-7000-8000-000000000001"
EPOCH = "epoch-1"


def _conversation() -> list[Message]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return [
        Message("Run the test suite", now, "leader", "worker-1"),
        Message("All 412 tests pass ✅", now, "worker-1", "leader"),
    ]


def main() -> int:
    identity = X25519Identity.generate()
    recipient = identity.recipient.to_string()
    print("syncengine codec demo: seal -> what the relay sees -> open\n")
    for cipher in ("none", "age-v1"):
        for message in _conversation():
            binding = Binding(team_id=TEAM_ID, wire_id=str(uuid.uuid4()))
            if cipher == "none":
                params, ctx = SealParams(binding=binding), OpenContext(binding=binding)
            else:
                params = SealParams(binding=binding, key_id=EPOCH, recipients=(recipient,))
                ctx = OpenContext(
                    binding=binding, trusted_key_id=EPOCH, identities={EPOCH: identity}
                )
            envelope = seal(message, cipher, params)
            outcome = open_envelope(envelope, ctx)
            assert isinstance(outcome, Importable) and outcome.message == message
            print(f"[{cipher}] {message.from_agent} -> {message.to_agent}: {message.body}")
            print(
                f"  relay sees: v={envelope.v} cipher={envelope.cipher} key_id={envelope.key_id} "
                f"blob={envelope.blob_size} bytes digest={envelope.digest().hex()[:16]}…"
            )
            print(f"  opened: {outcome.state}\n")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
