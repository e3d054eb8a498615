"""SAEBench's own core evaluation (`run_evals`) agrees with ours to 1e-3 on every metric defined the same.

Needs sae-bench beside the environment (`SAE_BENCH_DIR`, see `sae.experiments.saebench_referee`); skipped
when it is unset or its core eval does not import. A tiny llama and a briefly trained TopK SAE on its
activations: the referee's code path, not its numbers on a real model (those are in sae/README.md).
"""

import pytest
import torch

import interp
from sae import make_sae
from sae.experiments import saebench_referee as R
from tests.tiny import tiny_hf


def test_saebench_core_agrees_with_ours():
    why = R.add_saebench_path()
    if why:
        pytest.skip(why)
    g = torch.Generator().manual_seed(0)
    model = interp.HookedModel(tiny_hf("llama"), interp.data.byte_tokenizer())
    hook = "blocks.1.hook_resid_post"
    seqs = torch.randint(0, 257, (8, 16), generator=g)
    _, cache = model.run_with_cache(seqs, names=[hook])
    x = cache[hook].reshape(-1, cache[hook].shape[-1]).float()
    sae = make_sae("topk", x.shape[1], 48, seed=0, k=6)
    sae.cfg.metadata.hook_name, sae.cfg.metadata.model_name = hook, "tiny-llama"
    opt = torch.optim.Adam(sae.parameters(), lr=3e-3)
    for _ in range(60):  # a little training: live and dead latents, FVU below 1
        loss = (sae(x) - x).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        sae.W_dec.data /= sae.W_dec.norm(dim=-1, keepdim=True)  # SAEBench checks unit decoder rows
    res = R.referee(model, sae, hook, seqs, x, batch_prompts=4)
    bad = [r for r in res["comparison"] if r["same_definition"] and not r["agrees"]]
    assert not bad, bad
    names = {r["metric"] for r in res["comparison"] if r["same_definition"]}
    assert {"l0", "frac_alive (1 - dead_frac)", "ce_loss_score (ce_recovered)", "kl_div_score"} <= names
    assert res["saebench_metrics"]["sparsity"]["l0"] > 0
