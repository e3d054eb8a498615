"""interp.contrib.mechanisms: superposition and attention mechanics.

- `neuron_expansion`: Fixed Parameter Expansion (FPE): split neurons at a fixed nonzero count, with
  capacity / interference / polysemanticity metrics.
- `bayes_attention`: the closed-form Bayes head, in-context exponential-family tasks, mean-space
  metric heads and the QK-metric vs Fisher-information diagnostic (BayesAttn).
- `pace_attention`: MCR² coding rates (R, R_c, ΔR), CRATE's subspace attention and the
  compression-expansion PACE layer in a small ViT (PACEAttention).
- `fourier_sb`: translation-invariant signals with power-law spectra, phase-only tasks, amplitude/phase
  reliance probes, the positional spectrum of cached activations (FourierSB).

See README.md in this folder for the measured results and the commands that produce them.
"""
