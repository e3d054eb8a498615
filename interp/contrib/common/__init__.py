"""Helpers the contrib papers share, one concept a file; import from the file, not from here.

- `datasets`: sklearn's bundled data sets as tensors (`digits`, `diabetes`);
- `ranks`: Spearman correlation and AUROC, from scipy and scikit-learn;
- `ridge`: closed-form ridge regression and the one-hot ridge classifier;
- `probe`: a multinomial logistic probe trained by full-batch Adam;
- `fit`: one training loop (optimiser, schedule, seeded batches, early stopping).

Importing this package imports nothing heavy; each file imports what it needs.
"""
