"""interp.contrib.privacy: RepUnl (unlearning by a learned transform on one layer), DP-SMK (private
submodular maximisation), CREDIT (ownership verification by MI of embeddings), FedFit (federated sparse
training)."""
