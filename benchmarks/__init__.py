"""Benchmarks: each module prints a comparison table and writes JSON. Run them as modules from
the repository's root, e.g. ``.venv/bin/python -m benchmarks.failover`` (``make bench`` runs the
usual set)."""
