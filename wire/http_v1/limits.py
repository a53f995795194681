"""Numbers that only the HTTP v1 schemas fix (server/spec/v1.md).

Protocol-wide numbers (sequence maximum, blob size, batch and page limits,
request size) are named once in :mod:`wire.limits` and imported from there;
this module names the rest, each next to the spec section that fixes it.
"""

from __future__ import annotations

#: v1.md "Client version header": at most 64 printable ASCII characters.
MAX_CLIENT_VERSION_CHARS = 64

#: v1.md "GET /v1/capabilities": at most 4096 effective policy-history entries.
MAX_POLICY_HISTORY = 4096

#: v1.md "GET /v1/members": a team has at most 1,000 active members.
MAX_MEMBERS = 1000

#: v1.md / read-state-synchronization.md "HTTP operation": one request names at
#: most 1,000 distinct members and 1,000 exact wire IDs in total.
MAX_READ_UPDATE_MEMBERS = 1000
MAX_READ_EXACT_IDS = 1000

#: ``page_limit`` of POST /v1/read-state/sync ranges over 1..1,000.
MAX_READ_PAGE_LIMIT = 1000

#: Unabsorbed exact read rows: 4,096 per member, 65,536 per team.
MAX_EXACT_PER_MEMBER = 4096
MAX_EXACT_PER_TEAM = 65536

#: Opaque bearer secrets and pairing tokens. The spec leaves their length open;
#: we bound them so a hostile peer cannot make us store or send megabytes.
MAX_SECRET_CHARS = 1024

#: v1.md "Pairing": a pairing token expires 15 minutes after issuance.
PAIRING_TOKEN_TTL_SECONDS = 15 * 60

#: Structural characters (``[``, ``{`` and ``,``) one HTTP body may hold,
#: counted anywhere, strings included (v1 strings are IDs, names, timestamps
#: and base64 blobs). The largest genuine document — a capabilities snapshot
#: with 4,096 policy entries — needs about 41,000; 8 MiB of ``[],`` would be
#: 2.8 million Python lists, ~25 times their bytes in memory (issue #14).
MAX_JSON_STRUCTURE = 262_144
