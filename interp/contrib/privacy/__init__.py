"""interp.contrib.privacy: RepUnl (`representation_unlearning.py`), unlearning by a learned transform on one layer."""
