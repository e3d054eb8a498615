"""interp.contrib.moe: MoE internals. SSMoE (`ssmoe.py`): a training-free router from expert-weight singular vectors."""
