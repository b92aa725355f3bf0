def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~20 s (deselect with -m 'not slow')")
