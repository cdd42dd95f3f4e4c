pytest_plugins = [
    "tests.stack",
    "tests.orchestrator",
    "tests.deployment",
    "tests.journeys.product",
]
