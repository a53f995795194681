"""relay: the untrusted HTTP API v1 server holding opaque sealed envelopes.

It depends on :mod:`wire` for schemas and digests and never on
:mod:`syncengine`.
"""
