"""Fault-injection and validation suite of issue 16 (a package: its module names never clash)."""
