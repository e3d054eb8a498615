"""interp.contrib.post_training: RL / preference objectives (issue 19). IPS-GRPO (`ips_grpo.py`): inverse
probability scaling against outcome-level mode collapse."""
