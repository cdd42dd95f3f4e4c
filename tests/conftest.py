pytest_plugins = ["devstack.fixtures"]
