"""Benchmarks of dbi on the real local stack: ``python -m bench`` (or ``dbi bench``)."""
