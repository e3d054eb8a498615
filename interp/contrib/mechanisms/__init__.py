"""interp.contrib.mechanisms: superposition and attention mechanics.

- `neuron_expansion`: Fixed Parameter Expansion (FPE): split neurons at a fixed nonzero count, with
  capacity / interference / polysemanticity metrics.
- `bayes_attention`: the closed-form Bayes head, in-context exponential-family tasks, mean-space
  metric heads and the QK-metric vs Fisher-information diagnostic (BayesAttn).

See README.md in this folder for the measured results and the commands that produce them.
"""
