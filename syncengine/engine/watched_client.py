"""The relay client the :class:`~syncengine.engine.engine.Engine` talks
through: every snapshot it returns is shown to the engine first.

It lives apart from :mod:`syncengine.engine.engine` because subclassing
:class:`~syncengine.http.client.RelayClient` imports the HTTP stack; the
engine imports this module only when it first needs the relay, so
``syncengine status`` and the other local commands never load ``httpx``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from syncengine.http.client import RelayClient

__all__ = ["WatchedClient"]


class WatchedClient(RelayClient):
    """The relay client whose every snapshot of the stream — a capability
    document or a read-state page, both carrying the floor and
    ``current_seq`` — the engine checks before anything acts on it."""

    watch: Callable[[Any], None] | None = None
    #: The newest capability snapshot the engine accepted: the read-state
    #: phase may reuse the one its cycle's pull ended with (specs/read-state.md §8).
    last_capabilities: Any = None

    def capabilities(self) -> Any:
        caps = super().capabilities()
        if self.watch is not None:
            self.watch(caps)
        self.last_capabilities = caps
        return caps

    def read_state_sync(self, request: Any) -> Any:
        # A read-state page is a snapshot too: one claiming a longer stream
        # than the relay serves, or an older one, must halt like a capability
        # snapshot would — not be merged, nor blamed on the local store (#14).
        page = super().read_state_sync(request)
        if self.watch is not None:
            self.watch(page)
        return page
