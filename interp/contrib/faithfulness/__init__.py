"""interp.contrib.faithfulness: reliability of explanations.

`verbalization.py` (VerbCheck controls), `cot_importance.py` (CIR/SR), `attribution_robustness.py` (AttrRob).
"""
