"""Runnable experiments: `python -m sae.experiments.synthetic`, `python -m sae.experiments.real_run`."""
