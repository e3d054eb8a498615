"""Runnable experiments checking the papers' claims on small models (minutes on a CPU); see circuits/README.md."""
