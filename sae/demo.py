"""`interp demo` step of the SAE family: a small C²R SAE on the demo store, its metrics and dashboard.

Trains on the middle layer's residual stream from the store the core demo step wrote
(`workdir/store`; a small one is cached if it is missing), in well under a minute on 2 cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def step(model: Any, workdir: Path) -> dict:
    import torch

    from interp.store import ActivationStore
    from sae import metrics as M
    from sae.cli import render_sae_dashboard
    from sae.train import TrainConfig, train_sae

    workdir = Path(workdir)
    hook = f"blocks.{model.n_layers // 2}.hook_resid_post"
    store_dir = workdir / "store"
    if not (store_dir / "manifest.json").exists() or hook not in ActivationStore.open(store_dir).hooks:
        from interp.cache.caching import CacheConfig, cache_activations

        store_dir = workdir / "sae_store"
        cache_activations(
            CacheConfig(
                out=str(store_dir),
                model=str(model.provenance.get("spec") or "smollm2-135m"),
                hooks=[hook],
                max_tokens=4096,
                ctx_len=128,
            ),
            model=model,
        )
    store = ActivationStore.open(store_dir)
    out = workdir / "sae" / "c2r"
    # ~20 passes over the demo store: about 10 s here, enough for the reconstruction to mean something.
    cfg = TrainConfig(
        arch="c2r", d_sae=512, k=16, hook=hook, total_tokens=300 * 1024, batch_size=1024, lr=1e-3, checkpoint_every=100
    )
    sae, report = train_sae(store, cfg, out, progress=False)
    x = store.get_rows(torch.arange(min(len(store), 4096)), hooks=hook)[hook].float()
    x = x[x.norm(dim=-1) <= 10 * x.norm(dim=-1).mean()]  # attention-sink rows are not SAE inputs
    rec = M.round_dict(M.reconstruction(sae, [x]))
    dash = render_sae_dashboard(str(out), str(store_dir), str(out / "dashboard"), n_features=16, max_rows=4096)
    return {"sae": str(out), "train": report, "metrics": rec, "dashboard": str(dash)}
