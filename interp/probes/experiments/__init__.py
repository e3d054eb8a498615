"""Experiments of the probes family (runnable modules): `python -m interp.probes.experiments.decoupling`."""
