"""interp.contrib.moe: MoE internals. SSMoE (`ssmoe.py`): a training-free router from expert-weight singular vectors;
MoE-NoiseFilter (`noise_filter.py`): iso-parameter MoE vs dense under feature noise."""
