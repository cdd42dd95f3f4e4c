pytest_plugins = ["devstack.fixtures", "tests.orchestrator"]
