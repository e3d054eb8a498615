"""interp.contrib.generative: stochastic binary coding with channel simulation (SBC)."""
