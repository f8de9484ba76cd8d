"""The Connect runtime (connectors, tasks, workers, REST API) lives here.

It is the layer above ``streamkit.streams`` in DESIGN.md and arrives with the Connect issue;
until then this package deliberately exports nothing.
"""

__all__: list[str] = []
