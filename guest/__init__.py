"""The guest program: what runs inside a DBInstance's VM, installed in the image as
``dbi-bootstrap``. Standard library only, so it runs on the image's own Python.

``docs/guest.md`` is the contract between dbi and an image: the bootstrap document,
the files on the data disk, what each boot does and what the orchestrator reads back.
"""
