"""``dbi worker`` with every converge step stubbed (``bench.stubs``): what
``python -m bench --steps stub`` runs, so that the engine alone is measured."""

from __future__ import annotations

import asyncio

from bench import stubs
from workflows import worker

if __name__ == "__main__":
    asyncio.run(worker.main(stubs.activities))
