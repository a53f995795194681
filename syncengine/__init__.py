"""syncengine: the client side of encrypted, crash-safe agmsg store sync.

The package depends on :mod:`wire` for every byte that crosses a process or
network boundary and never on :mod:`relay`.
"""

__version__ = "0.1.0"

from syncengine._startup import skip_httpx_cli as _skip_httpx_cli

_skip_httpx_cli()
