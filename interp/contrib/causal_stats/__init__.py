"""interp.contrib.causal_stats: causal and statistical estimation (issue 19). StreamATE (`stream_ate.py`),
SelfTrain (`self_training.py`), CFL (`causal_feature_learning.py`), EIG-ExpFam (`eig_expfam.py`),
FI-Bagging (`feature_bagging.py`)."""
