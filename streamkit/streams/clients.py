"""The runtime's client lifecycle helpers: those of ``streamkit.clients.lifecycle``, which
Connect and the CLI use too."""

from streamkit.clients.lifecycle import start_client, stop_client

__all__ = ["start_client", "stop_client"]
