import os

# The credentials Secret's uri names the Service's ClusterIP too (hostaddr), as `./dev
# up` has it: this host has no cluster DNS for the Secret's host. Every worker the tests
# start, in process or as a process, reads it.
os.environ.setdefault("DBI_CONNECT_HOSTADDR", "1")

pytest_plugins = [
    "tests.stack",
    "tests.orchestrator",
    "tests.deployment",
    "tests.journeys.product",
]
