"""Relay storage: the :class:`RelayStore` interface and its SQLite implementation."""
