"""`interp demo` step of the attribution family (well under a minute on 2 cores).

1. Trains a tiny looped GPT for 30 steps on the byte-level standard-library corpus (checkpoints at 10,
   20, 30 with their learning rates), then runs the batch job `interp attribute run --method sdi` on it:
   Step-Decomposed Influence of 32 training sequences on 4 queries, TensorSketch m = 1024, and checks
   that the loop steps sum to TracIn. The same job with exact gradients gives the sketch's error.
2. Prefix-matching (induction) and previous-token scores of the demo model's heads: the top heads.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from attribution.jobs import AttributeConfig, load_scores, run_attribution, save_tokens
from attribution.looped import random_looped_gpt
from attribution.mda import prefix_matching_scores, previous_token_scores
from attribution.train import train_lm
from interp.data import BYTE_TOKENIZER_NAME, byte_tokenizer, resolve_corpus


def step(model, workdir: Path) -> dict:
    t0 = time.perf_counter()
    root = Path(workdir) / "attribution"
    root.mkdir(parents=True, exist_ok=True)
    tokens = resolve_corpus("stdlib-docs", byte_tokenizer(), ctx_len=32, max_tokens=160 * 32, seed=0).tokens.long()
    run = root / "looped_run"
    if not (run / "step_30").exists():
        looped = random_looped_gpt(hidden_size=32, num_attention_heads=2, num_hidden_layers=4, intermediate_size=64,
                                   max_position_embeddings=32)
        train_lm(looped, tokens[:128], steps=30, batch_size=8, lr=2e-3, save_steps=(10, 20, 30), out=run)
    save_tokens(root / "train.safetensors", tokens[:32], BYTE_TOKENIZER_NAME)
    save_tokens(root / "queries.safetensors", tokens[128:132], BYTE_TOKENIZER_NAME)
    common = dict(method="sdi", model=f"looped-gpt:{run}", train=f"tokens:{root / 'train.safetensors'}",
                  queries=f"tokens:{root / 'queries.safetensors'}", shard_size=8, device="cpu")
    job = run_attribution(AttributeConfig(out=str(root / "sdi_sketch"), sketch_dim=1024, **common), progress=False)
    run_attribution(AttributeConfig(out=str(root / "sdi_exact"), sketch_dim=None, **common), progress=False)
    sk, ex = load_scores(root / "sdi_sketch"), load_scores(root / "sdi_exact")
    gap = float((sk["sdi"].sum(-1) - sk["scores"]).abs().max() / sk["scores"].abs().max())
    pm = prefix_matching_scores(model, n=4, half=16, seed=0, bos=0)
    prev = previous_token_scores(model, n=4, length=32)

    def top(scores, k=3):
        flat = scores.flatten()
        idx = flat.topk(k).indices
        return {f"L{int(i) // scores.shape[1]}H{int(i) % scores.shape[1]}": round(float(flat[i]), 3) for i in idx}

    return {
        "sdi_job": {"out": job["out"], "shards": job["shards"], "train": 32, "queries": 4, "loop_steps": 4,
                    "sketch_dim": 1024,
                    "relative_error_vs_exact": round(float((sk["sdi"] - ex["sdi"]).norm() / ex["sdi"].norm()), 4),
                    "steps_sum_to_tracin_max_gap": gap,
                    "mean_share_per_step": [round(float(x), 3) for x in
                                            (ex["sdi"].abs().sum((0, 1)) / ex["sdi"].abs().sum())]},
        "top_prefix_matching_heads": top(pm),
        "top_previous_token_heads": top(prev),
        "seconds": round(time.perf_counter() - t0, 1),
    }


if __name__ == "__main__":
    import json
    import tempfile

    import interp

    torch.set_num_threads(1)
    print(json.dumps(step(interp.load_model("pythia-14m-init"), Path(tempfile.mkdtemp())), indent=1))
