"""The relay's HTTP v1 edge: intake, body schemas, rendering and the ASGI app."""
