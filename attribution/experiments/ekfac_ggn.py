"""EK-FAC against the explicit damped GGN on a micro Llama head, over weight scales, label samples and damping.

    python -m attribution.experiments.ekfac_ggn        # from the repository root (uses the test's reference); ~2 min

The micro Llama (d 16, 4 query / 2 k-v heads of d_head 4, tied embeddings) and the explicit GGN reference
(J^T (diag p - p p^T) J over every position, 128 x 128) are those of
`tests/attribution/test_architectures.py`. Prints one JSON line per setting: Spearman of EK-FAC influence
against exact damped-GGN influence on 40 training sequences, copy-target probe.
"""

from __future__ import annotations

import json

import torch
from scipy.stats import spearmanr

from attribution.influence import (
    HeadComponent,
    component_gradients,
    fit_ekfac,
    flatten_blocks,
    influence_scores,
    mean_gradient,
)
from attribution.mda import copy_target_probe
from tests.attribution.test_architectures import _exact_ggn_llama, micro_llama


def main() -> None:
    torch.set_num_threads(1)
    for scale in (8.0, 4.0, 2.0):
        model = micro_llama()
        for name, p in model.hf_model.named_parameters():
            if p.ndim == 2 and "embed" not in name:
                p.data.mul_(scale / 8.0)
        comp = HeadComponent(1, 3, "qk")
        g = torch.Generator().manual_seed(1)
        fit, train = torch.randint(0, 16, (16, 8), generator=g), torch.randint(0, 16, (40, 8), generator=g)
        probe = mean_gradient(model, comp, torch.randint(0, 8, (8, 4), generator=g).repeat(1, 2), copy_target_probe())
        ggn = _exact_ggn_llama(model, comp, fit)
        grads = flatten_blocks(component_gradients(model, comp, train))
        for samples in (8, 32):
            for alpha in (0.1, 1.0):
                f = fit_ekfac(model, comp, fit, label_samples=samples, damping_alpha=alpha)
                ek, _ = influence_scores(model, f, train, probe)
                v = torch.linalg.solve(ggn + alpha * f.lam["qk"].mean() * torch.eye(len(ggn)), flatten_blocks(probe))
                rho = spearmanr(ek.numpy(), (-(grads @ v)).detach().numpy()).statistic
                print(
                    json.dumps(
                        {
                            "weight_scale": scale,
                            "label_samples": samples,
                            "alpha": alpha,
                            "spearman": round(float(rho), 3),
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
