"""The worker's machinery: the registry of every activity it hosts, the runner of a
pass (``passes``), the load and the status write around it, the re-checks of settled
instances between passes, and each step's telemetry."""
