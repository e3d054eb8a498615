"""interp.contrib.geometry: representation geometry and neural collapse on cached states.

- `ricci_flow`: kNN graphs per layer, Forman curvature, Ricci-evolution coefficients (RicciFlow).
- `neural_collapse`: NC1-NC3, effective rank, the deep unconstrained-feature model (DeepUFM) and the
  Gauss-Newton bulk-outlier check against the class-mean subspace (DNC-Spectra).
- `contrastive_gap`: modality gap, marginal divergences and InfoNCE energy terms (InfoNCE-Geo).

See README.md in this folder for the measured results and the commands that produce them.
"""
