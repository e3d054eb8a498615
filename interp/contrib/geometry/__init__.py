"""interp.contrib.geometry: representation geometry and neural collapse on cached states.

- `ricci_flow`: kNN graphs per layer, Forman curvature, Ricci-evolution coefficients (RicciFlow).
- `neural_collapse`: NC1-NC3, effective rank, the deep unconstrained-feature model (DeepUFM) and the
  Gauss-Newton bulk-outlier check against the class-mean subspace (DNC-Spectra).
- `contrastive_gap`: modality gap, marginal divergences and InfoNCE energy terms (InfoNCE-Geo).
- `rdm_reg`: sliced-Wasserstein matching to a rectified generalized Gaussian, the RGG score of cached
  activations (RDMReg, Rectified LpJEPA).
- `info_globe`: Fisher-Rao-preserving soft feature grouping on the square-root sphere (InfoGlobe).

See README.md in this folder for the measured results and the commands that produce them.
"""
