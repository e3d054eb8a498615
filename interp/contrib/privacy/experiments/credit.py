"""CREDIT demo: MI-based ownership verification of copies extracted from a defended API, against
independently trained models, on digits and on SmolLM2's final hidden states.

    python -m interp.contrib.privacy.experiments.credit [--seeds 3] [--quick] [--no-lm]

Digits (catalog setting): the owner is an MLP 64-128-32-10 whose 32-d layer is the embedding z; the API
serves softmax(head(z')) with z' the CREDIT-defended embedding at σ = s · (mean std of z's coordinates),
s ∈ {0, 0.5, 1}. Three surrogates (same architecture, other seeds) are distilled from 2,000 API queries
(the owner's 1,000 training images and 1,000 jittered copies; KL to the served probabilities); three
independent models are trained from scratch on the labels. Verification: 300 held-out images; the
score is `credit_score` between the owner's clean embedding and the suspect's. AUROC over the 3 x 3
surrogate/independent pairs; τ is `certified_threshold`.

SmolLM2 (`smollm2-135m`, cached stdlib-docs + stdlib stores, 48 x 64 tokens each): the owner's
embedding is `ln_final.hook_normalized` (576-d); the served API is the model's own unembedding
restricted to the 256 most frequent next tokens, applied to the defended state. The attacker sees the
same rows through a public feature (the layer-6 residual, `blocks.6.hook_resid_post`; a stand-in for
"the input") and trains a copy 576-128-32-256 on the API's outputs; the non-derived control is the
same architecture trained on the true next tokens. Scores use the owner's top-32 principal components
against the copy's 32-d layer, on 400 held-out rows.
"""

from __future__ import annotations

import json

import numpy as np
import torch
import torch.nn.functional as F

from interp.contrib.common.datasets import digits
from interp.contrib.common.fit import fit, make_optimizer
from interp.contrib.common.ranks import auroc
from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.privacy.credit import certified_threshold, credit_score, defend
from interp.contrib.report import fmt, markdown_table


class Net(torch.nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_emb: int, n_out: int):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(d_in, d_hidden), torch.nn.ReLU(), torch.nn.Linear(d_hidden, d_emb)
        )
        self.head = torch.nn.Linear(d_emb, n_out)

    def forward(self, x):
        z = self.body(x)
        return z, self.head(z)


def train(net: Net, x: torch.Tensor, target: torch.Tensor, soft: bool, steps: int, lr: float = 3e-3) -> Net:
    def loss_fn(_) -> torch.Tensor:
        _, logits = net(x)
        return (
            F.kl_div(F.log_softmax(logits, -1), target, reduction="batchmean")
            if soft
            else F.cross_entropy(logits, target)
        )

    fit(make_optimizer(net.parameters(), lr=lr, weight_decay=1e-4), loss_fn, range(steps))
    return net


def embed(net: Net, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return net(x)[0].double().numpy()


def served_probs(owner: Net, x: torch.Tensor, sigma: float, rng: np.random.Generator) -> torch.Tensor:
    z = embed(owner, x)
    w = owner.head.weight.detach().double().numpy()
    zp = defend(z, w, sigma, rng) if sigma > 0 else z
    with torch.no_grad():
        return F.softmax(owner.head(torch.from_numpy(zp).float()), -1)


def verify(owner_emb, suspects: dict[str, list[np.ndarray]], sigma, queries, rng) -> dict:
    scores = {k: [credit_score(owner_emb, e, rng=rng) for e in v] for k, v in suspects.items()}
    auc = auroc(
        torch.tensor(scores["surrogate"], dtype=torch.float64), torch.tensor(scores["independent"], dtype=torch.float64)
    )
    tau = certified_threshold(owner_emb, sigma, queries) if sigma > 0 else float("nan")
    return {**scores, "auroc": float(auc), "tau": tau}


def digits_run(seed: int, scales, steps: int, n_models: int) -> dict:
    x, y = digits()
    g = np.random.default_rng(seed)
    perm = torch.from_numpy(g.permutation(len(x)))
    x, y = x[perm], y[perm]
    tr, ver, te = slice(0, 1000), slice(1000, 1300), slice(1300, None)
    torch.manual_seed(seed)
    owner = train(Net(64, 128, 32, 10), x[tr], y[tr], False, steps)
    z_tr = embed(owner, x[tr])
    queries = torch.cat([x[tr], (x[tr] + 0.1 * torch.randn_like(x[tr])).clamp(0, 1)])
    owner_ver = embed(owner, x[ver])
    out = {}
    indep = []
    for m in range(n_models):
        torch.manual_seed(10_000 + 100 * seed + m)
        indep.append(embed(train(Net(64, 128, 32, 10), x[tr], y[tr], False, steps), x[ver]))
    for s in scales:
        sigma = s * float(z_tr.std(0).mean())
        rng = np.random.default_rng(seed)
        with torch.no_grad():
            acc_clean = float((owner(x[te])[1].argmax(-1) == y[te]).float().mean())
        acc_served = float((served_probs(owner, x[te], sigma, rng).argmax(-1) == y[te]).float().mean())
        api = served_probs(owner, queries, sigma, rng)
        surr = []
        for m in range(n_models):
            torch.manual_seed(20_000 + 100 * seed + m)
            surr.append(embed(train(Net(64, 128, 32, 10), queries, api, True, steps), x[ver]))
        out[s] = {
            "acc_clean": acc_clean,
            "acc_served": acc_served,
            **verify(owner_ver, {"surrogate": surr, "independent": indep}, sigma, len(queries), rng),
        }
    return out


def _pca(x: np.ndarray, k: int) -> np.ndarray:
    x = x - x.mean(0)
    _, _, vh = np.linalg.svd(x, full_matrices=False)
    return x @ vh[:k].T


def lm_run(seed: int, scales, steps: int, n_models: int) -> dict:
    from interp.contrib.lm_features import corpus_store, hook_name, load_lm, token_rows

    feats, finals, toks, loaded = [], [], [], load_lm()  # its weights key the caches
    for corpus in ("stdlib-docs", "stdlib"):
        st = corpus_store(corpus, 48, 64, loaded=loaded)
        f6, idx = token_rows(st, hook_name(6))
        fin, _ = token_rows(st, "ln_final.hook_normalized")
        nxt = torch.full_like(idx["tokens"], -1)
        same = idx["seq"][1:] == idx["seq"][:-1]
        nxt[:-1][same] = idx["tokens"][1:][same]  # the next token of each row, -1 at a sequence end
        keep = nxt >= 0
        feats.append(f6[keep]), finals.append(fin[keep]), toks.append(nxt[keep])
    f6, fin, nxt = torch.cat(feats), torch.cat(finals), torch.cat(toks)
    vocab = torch.bincount(nxt).argsort(descending=True)[:256]
    lm = loaded or load_lm()
    w_un = lm.hf_model.get_output_embeddings().weight.detach()[vocab].double().numpy()  # [256, 576]
    inv = torch.full((int(nxt.max()) + 1,), -1)
    inv[vocab] = torch.arange(256)
    lab = inv[nxt]
    g = np.random.default_rng(seed)
    perm = torch.from_numpy(g.permutation(len(f6)))
    ver, tr = perm[:400], perm[400:]
    x = (f6 - f6[tr].mean(0)) / f6[tr].std(0).clamp_min(1e-6)
    owner_ver = _pca(fin[ver].double().numpy(), 32)
    z_tr = fin[tr].double().numpy()
    has = lab[tr] >= 0
    out = {}
    indep = []
    for m in range(n_models):
        torch.manual_seed(30_000 + 100 * seed + m)
        net = train(Net(576, 128, 32, 256), x[tr][has], lab[tr][has], False, steps)
        indep.append(embed(net, x[ver]))
    for s in scales:
        sigma = s * float(z_tr.std(0).mean())
        rng = np.random.default_rng(seed)
        zp = defend(z_tr, w_un, sigma, rng) if sigma > 0 else z_tr
        api = F.softmax(torch.from_numpy(zp @ w_un.T).float(), -1)
        clean = F.softmax(torch.from_numpy(z_tr @ w_un.T).float(), -1)
        agree = float((api.argmax(-1) == clean.argmax(-1)).float().mean())
        surr = []
        for m in range(n_models):
            torch.manual_seed(40_000 + 100 * seed + m)
            surr.append(embed(train(Net(576, 128, 32, 256), x[tr], api, True, steps), x[ver]))
        out[s] = {
            "top1_agreement_served_vs_clean": agree,
            **verify(owner_ver, {"surrogate": surr, "independent": indep}, sigma, len(tr), rng),
        }
    return out


def _table(res_by_seed: list[dict], scales, acc_cols) -> str:
    rows = []
    for s in scales:
        r = [x[s] for x in res_by_seed]
        sur = [float(np.mean(x["surrogate"])) for x in r]
        ind = [float(np.mean(x["independent"])) for x in r]
        rows.append(
            [
                s,
                *(fmt([x[c] for x in r]) for c in acc_cols),
                fmt(sur),
                fmt(ind),
                fmt([x["auroc"] for x in r], 2),
                fmt([x["tau"] for x in r]) if s > 0 else "-",
            ]
        )
    return markdown_table(
        ["σ / std(z)", *acc_cols, "score surrogates", "score independent", "AUROC", "τ (our reading)"], rows
    )


def main(argv=None) -> dict:
    ap = experiment_parser(__doc__, seeds=3, quick="1 seed, 60 steps, 2 models per group, σ scale 1, no LM", no_lm=True)
    a = parse(ap, argv)
    seeds, steps, n_models = (1, 60, 2) if a.quick else (a.seeds, 300, 3)
    scales = (1.0,) if a.quick else (0.0, 0.5, 1.0)
    dig = [digits_run(s, scales, steps, n_models) for s in range(seeds)]
    print(f"digits: CREDIT scores (mean over suspects; mean ± sd over {seeds} seeds)")
    print(_table(dig, scales, ["acc_clean", "acc_served"]))
    out = {"digits": dig}
    if not (a.quick or a.no_lm):
        lm = [lm_run(s, scales, 200, n_models) for s in range(seeds)]
        print("\nsmollm2-135m final states: copies trained on the served top-256 next-token distribution vs on labels")
        print(_table(lm, scales, ["top1_agreement_served_vs_clean"]))
        out["smollm2"] = lm
    return json.loads(json.dumps(out, default=float))


if __name__ == "__main__":
    main()
