"""interp.contrib.causal_stats: causal and statistical estimation (issue 19). SelfTrain (`self_training.py`):
iterated ridge self-distillation and its iterated-GCV stopping rule; IPS-GRPO lives in `post_training`."""
