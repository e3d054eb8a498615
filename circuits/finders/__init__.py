"""Circuit finders, one file per method: EAP and EAP-IG (`eap`: Syed et al. 2023, Hanna et al. 2024), SafeSeek
(`safeseek`: Yu et al. 2026), weight-sparse training and task pruning (`weight_sparse`, `prune`: Gao et al. 2025);
the differentiable unit masks SafeSeek and pruning share (`masks`); one entry point for all of them (`extract`)."""
