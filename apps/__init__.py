"""Example stream apps for streamkit; run one with ``streamkit worker -A apps.NAME``."""
