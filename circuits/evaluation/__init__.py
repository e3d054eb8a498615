"""Judging a circuit: the model's behaviour before any search (`baseline`), exact edge patching (`edge_patching`),
faithfulness and minimality (`faithfulness`), necessity and sufficiency ablations (`ablation`), and the
activation-difference control (`controls`)."""
