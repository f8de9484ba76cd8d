"""Apps that the worker-process tests run with ``python -m streamkit worker -A ...``."""
