def pytest_configure(config):
    config.addinivalue_line("markers", "slow: minute-long test (deselect with -m 'not slow')")
