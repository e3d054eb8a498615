"""Claim checks, one runnable module per method: `python -m attribution.experiments.<name> --help`."""
