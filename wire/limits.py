"""Every number the protocol fixes, named once (server/spec/v1.md)."""

from __future__ import annotations

#: Signed 64-bit maximum: every sequence, cursor and revision fits here.
MAX_SEQ = 2**63 - 1

#: Protocol maximum of a decoded envelope blob (1 MiB).
MAX_BLOB_BYTES = 1024 * 1024

#: Longest canonical padded base64 text of a MAX_BLOB_BYTES blob.
MAX_BLOB_CHARS = 4 * ((MAX_BLOB_BYTES + 2) // 3)

#: A message body, in UTF-8 bytes before JSON escaping.
MAX_BODY_BYTES = 1_000_000

#: Agent, member and team names, in Unicode scalar values after NFC.
MAX_NAME_SCALARS = 128

#: A non-null envelope key_id, in UTF-8 bytes.
MAX_KEY_ID_BYTES = 256

#: Request bodies, counted from streamed bytes.
MAX_REQUEST_BYTES = 2 * 1024 * 1024

#: Elements of one POST /v1/messages batch; also the page-limit ceiling.
MAX_BATCH = 1000
MAX_PAGE_LIMIT = 1000
DEFAULT_PAGE_LIMIT = 100

#: Supported envelope format and protocol versions.
ENVELOPE_VERSION = 1
PROTOCOL_VERSION = 1

#: Deepest JSON nesting the strict decoder accepts; protocol documents are
#: at most a few levels deep, so anything deeper is hostile input.
MAX_JSON_DEPTH = 64

#: Largest integer magnitude a JSON number may carry (I-JSON, RFC 7493):
#: beyond it a JavaScript peer would silently lose precision.
MAX_SAFE_INTEGER = 2**53 - 1
