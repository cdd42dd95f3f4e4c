pytest_plugins = [
    "devstack.fixtures",
    "tests.orchestrator",
    "tests.deployment",
    "tests.journeys.product",
]
