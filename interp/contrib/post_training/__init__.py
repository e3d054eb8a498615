"""interp.contrib.post_training: RL / preference objectives (issue 19). IPS-GRPO (`ips_grpo.py`), MIPO
(`mipo.py`), SCPO (`scpo.py`); `preference.py` holds the shared DPO loss."""
