"""The package version (lowest layer: the release metadata and the CLI read it)."""

__version__ = "0.1.0"
