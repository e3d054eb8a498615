"""interp.contrib.uncertainty_ood: evidential OOD probes (GEM), subspace-energy open-set rejection (SAFER), active
feature acquisition (L2M)."""
