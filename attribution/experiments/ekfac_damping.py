"""EK-FAC damping scopes against the explicit damped GGN on a micro GPT-NeoX head (fused q|k|v).

    python -m attribution.experiments.ekfac_damping        # from the repository root (uses the tests' micro model)

Damping `alpha * mean(lambda)` with the mean over each Kronecker block ("block", MDA's code), over the whole head
("head": one scalar for the head's factors) or per module ("module": Kronfluence damps each module; q|k and v
share the projection's input, o is the output projection). Each is compared with the exact GGN (J^T (diag p -
p p^T) J over every position, built from the logits' Jacobians) damped the *same* way (how well the Kronecker
approximation follows its own damped objective) and damped by one scalar, the head's (the textbook damped
influence function). Prints one JSON line per (component, alpha, scope): Spearman over 40 training sequences,
copy-target probe.
"""

from __future__ import annotations

import argparse
import json

import torch
from scipy.stats import spearmanr

from attribution.influence import (
    DAMPING_SCOPES,
    HeadComponent,
    component_gradients,
    fit_ekfac,
    flatten_blocks,
    influence_scores,
    mean_gradient,
)
from attribution.mda import copy_target_probe
from tests.attribution.helpers import exact_ggn
from tests.attribution.test_influence import micro_neox


def head_ggn(model, comp: HeadComponent, ids) -> torch.Tensor:
    """Exact GGN over the head's parameters in `flatten_blocks` order: q|k rows with bias, v rows with bias,
    then the output projection's columns of the head (no bias)."""
    layer = f"gpt_neox.layers.{comp.layer}.attention"
    qkv, dense = (
        model.hf_model.get_submodule(f"{layer}.query_key_value"),
        model.hf_model.get_submodule(f"{layer}.dense"),
    )
    dh, h = model.d_head, comp.head
    base = h * 3 * dh
    qk_rows, v_rows = torch.arange(base, base + 2 * dh), torch.arange(base + 2 * dh, base + 3 * dh)
    parts = [torch.cat([qkv.weight[r], qkv.bias[r, None]], -1) for r in (qk_rows, v_rows)]
    if "o" in comp.mode:
        parts.append(dense.weight[:, h * dh : (h + 1) * dh])
    sizes = [p.numel() for p in parts]
    theta = torch.cat([p.detach().flatten() for p in parts]).clone().requires_grad_(True)
    chunks = list(torch.split(theta, sizes))
    qk, v = chunks[0].view(2 * dh, -1), chunks[1].view(dh, -1)
    w = qkv.weight.detach().clone().index_put((qk_rows,), qk[:, :-1]).index_put((v_rows,), v[:, :-1])
    b = qkv.bias.detach().clone().index_put((qk_rows,), qk[:, -1]).index_put((v_rows,), v[:, -1])
    params = {f"{layer}.query_key_value.weight": w, f"{layer}.query_key_value.bias": b}
    if "o" in comp.mode:
        o = chunks[2].view(dense.weight.shape[0], dh)
        wo = dense.weight.detach().clone()
        params[f"{layer}.dense.weight"] = torch.cat([wo[:, : h * dh], o, wo[:, (h + 1) * dh :]], 1)
    return exact_ggn(model, theta, params, ids)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label-samples", type=int, default=8)
    ap.add_argument("--alphas", default="0.1,1.0")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = micro_neox()
    g = torch.Generator().manual_seed(1)
    fit, train = torch.randint(0, 16, (16, 8), generator=g), torch.randint(0, 16, (40, 8), generator=g)
    probe_ids = torch.randint(0, 8, (8, 4), generator=g).repeat(1, 2)
    rows = []
    for mode in ("qkv", "qkvo"):
        comp = HeadComponent(1, 2, mode)
        probe = mean_gradient(model, comp, probe_ids, copy_target_probe())
        ggn = head_ggn(model, comp, fit)
        grads = flatten_blocks(component_gradients(model, comp, train))
        for alpha in map(float, args.alphas.split(",")):
            for scope in DAMPING_SCOPES:
                f = fit_ekfac(
                    model, comp, fit, label_samples=args.label_samples, damping_alpha=alpha, damping_scope=scope
                )
                ek, _ = influence_scores(model, f, train, probe)
                damp = f.damping()
                diag = torch.cat([damp[k].expand(f.lam[k].numel()) for k in sorted(f.lam)])
                one = alpha * torch.cat([f.lam[k].flatten() for k in f.lam]).mean()
                row = {
                    "component": str(comp),
                    "alpha": alpha,
                    "scope": scope,
                    "damping": {k: float(v) for k, v in damp.items()},
                }
                for name, d in (
                    ("vs_exact_same_damping", torch.diag(diag)),
                    ("vs_exact_one_scalar", one * torch.eye(len(ggn))),
                ):
                    v = torch.linalg.solve(ggn + d, flatten_blocks(probe))
                    row[name] = round(float(spearmanr(ek.numpy(), (-(grads @ v)).detach().numpy()).statistic), 3)
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


if __name__ == "__main__":
    main()
