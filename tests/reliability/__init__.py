"""Fault-injection and validation suite (a package: its module names never clash)."""
