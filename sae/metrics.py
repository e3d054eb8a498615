"""Metrics for SAEs: reconstruction and sparsity, loss recovered when spliced into a model, ground-truth
absorption/splitting on synthetic data, the first-letter absorption/splitting task on a real model,
sparse-probing F1, per-latent 1-D Wasserstein distances, PolySAE interaction vs co-occurrence, and
coherence's locality / tuned-feature fraction. Plain functions over tensors and a loaded SAE.

Conventions: `x` [n, d_in] activations; `z = sae.encode(x)` [n, d_sae] codes; decoder directions are
W_dec rows for linear decoders and the linear atoms U C1ᵀ for PolySAE (`decoder_directions`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor


# ---- basics --------------------------------------------------------------------------------------------
def decoder_directions(sae: Any) -> Tensor:
    """[d_sae, d_in] unit decoder directions (PolySAE: its linear atoms)."""
    with torch.no_grad():
        W = sae.linear_atoms() if hasattr(sae, "linear_atoms") else sae.W_dec
        return W / W.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def atom_norms(sae: Any) -> Tensor:
    """[d_sae] norm of what one unit of each code adds to the reconstruction (its linear atom): ||W_dec_i||,
    1 when the SAE rescales codes by the decoder norm (sae-lens `rescale_acts_by_decoder_norm`), and the
    linear atoms ||(U C1ᵀ)_i|| for PolySAE."""
    with torch.no_grad():
        W = sae.linear_atoms() if hasattr(sae, "linear_atoms") else sae.W_dec
        n = W.norm(dim=-1)
        if getattr(sae.cfg, "rescale_acts_by_decoder_norm", False) and not hasattr(sae, "linear_atoms"):
            n = torch.ones_like(n)
        return n.detach()


def in_input_units(sae: Any, z: Tensor) -> Tensor:
    """Codes times atom norms: each latent's contribution measured in the input space's units, so
    scale-dependent metrics (W1, activation magnitudes, interaction statistics) compare SAEs whose
    decoders are normalised differently (a code c with atom norm s equals a code c·s with a unit atom)."""
    return z * atom_norms(sae).to(z.dtype)


@torch.no_grad()
def encode(sae: Any, x: Tensor, batch_size: int = 4096) -> Tensor:
    """Codes for many rows, in chunks of `batch_size` (eval mode). With an inference SAE (`load_sae`'s
    default, `sae.inference.to_inference`) the codes do not depend on the chunking; a BatchTopK-family
    *training* SAE selects over each chunk (the explicit batch-level option)."""
    sae.eval()
    return torch.cat([sae.encode(x[i : i + batch_size]) for i in range(0, len(x), batch_size)])


@torch.no_grad()
def reconstruction(sae: Any, batches: Iterable[Tensor], dense_threshold: float = 0.1) -> dict[str, float]:
    """MSE (summed over d_in, mean over rows), FVU, L0, and dead/dense latent fractions over `batches`.

    Dead: never fired on any of these rows (the window is the rows themselves: `dead_window_rows`); dense:
    fires on more than `dense_threshold` of them. The one meaning of dead/dense of the toolkit: `sae eval`,
    the train report's `eval`, the dashboards and the SAEBench-format JSON all count it on the held-out rows
    the row rule keeps (all rows when training held none out). Also SAEBench core's reconstruction and
    shrinkage numbers (l1, cossim, l2 norms and ratio, relative reconstruction bias E[x̂·x̂]/E[x̂·x], the
    share of latents and of firing mass above 1% / 10% density).
    """
    sae.eval()
    n, se, s1, s2, l0 = 0, 0.0, None, None, 0.0
    fires = None
    extra = dict.fromkeys(("l1", "cossim", "l2_in", "l2_out", "l2_ratio", "xh_xh", "xh_x"), 0.0)
    for x in batches:
        x = x.float()
        z = sae.encode(x)
        xh = sae.decode(z)
        se += float((xh - x).square().sum())
        extra["l1"] += float(torch.linalg.vector_norm(z, ord=1))  # one fused pass, no |z| copy
        extra["cossim"] += float(torch.nn.functional.cosine_similarity(xh, x, dim=-1).sum())
        n_in, n_out = x.norm(dim=-1), xh.norm(dim=-1)
        extra["l2_in"] += float(n_in.sum())
        extra["l2_out"] += float(n_out.sum())
        extra["l2_ratio"] += float((n_out / n_in.clamp_min(1e-12)).sum())
        extra["xh_xh"] += float((xh * xh).sum())
        extra["xh_x"] += float((xh * x).sum())
        s1 = x.sum(0) if s1 is None else s1 + x.sum(0)
        s2 = x.square().sum(0) if s2 is None else s2 + x.square().sum(0)
        f = (z > 0).sum(0)  # one pass over the codes gives both the per-latent counts and L0
        fires = f if fires is None else fires + f
        l0 += float(f.sum())
        n += x.shape[0]
    if not n:
        raise ValueError("no rows to evaluate")
    total_var = float((s2 - s1.square() / n).sum())
    freq = fires.float() / n
    return {
        "mse": se / n,
        "fvu": se / max(total_var, 1e-12),
        "l0": l0 / n,
        "dead_frac": float((freq == 0).float().mean()),
        "dense_frac": float((freq > dense_threshold).float().mean()),
        "rows": n,
        "dead_window_rows": n,
        "dense_threshold": dense_threshold,
        "l1": extra["l1"] / n,
        "cossim": extra["cossim"] / n,
        "l2_norm_in": extra["l2_in"] / n,
        "l2_norm_out": extra["l2_out"] / n,
        "l2_ratio": extra["l2_ratio"] / n,
        "relative_reconstruction_bias": extra["xh_xh"] / extra["xh_x"] if extra["xh_x"] else float("nan"),
        "freq_over_1_percent": float((freq > 0.01).float().mean()),
        "freq_over_10_percent": float((freq > 0.1).float().mean()),
        "normalized_freq_over_1_percent": float(freq[freq > 0.01].sum() / freq.sum().clamp_min(1e-12)),
        "normalized_freq_over_10_percent": float(freq[freq > 0.1].sum() / freq.sum().clamp_min(1e-12)),
    }


# ---- splicing into a model -----------------------------------------------------------------------------
@torch.no_grad()
def spliced_loss(
    model: Any,
    sae: Any,
    hook: str,
    tokens: Tensor,
    mask: Tensor | None = None,
    batch_size: int = 8,
    rows: Any = None,
    cache: dict | None = None,
) -> dict[str, float]:
    """Next-token CE with the SAE's reconstruction replacing the hook's activation, against the clean
    model and zero ablation; CE recovered = (CE_zero - CE_sae) / (CE_zero - CE_clean); KL(clean || sae).

    Special rows (`rows`, an `interp.cache.rows.RowFilter`; default: the toolkit's default rule measured on these
    activations) keep their clean value in the SAE and zero runs: they are never SAE inputs. CE and KL
    cover every next-token prediction (KL: every position, the last one too, as SAEBench's core eval and
    sae-lens's evals average it); `spliced_frac` says which share of activations were replaced.
    `cache` (a dict the caller keeps) holds the zero-ablation CE per batch, which does not depend on the
    SAE: scoring several SAEs on the same tokens and rows then costs two forward passes each, not three."""
    from interp.cache.rows import RowRule
    from interp.wrapper.tokens import next_token_loss

    sae.eval()
    mask = torch.ones_like(tokens) if mask is None else mask
    n_spliced, n_all = [0], [0]

    def replace(fn, count=False):
        def hook_fn(t, hook):  # noqa: ARG001
            nonlocal rows
            flat = t.reshape(-1, t.shape[-1]).float()
            pos = torch.arange(t.shape[1], device=t.device).repeat(t.shape[0])
            if rows is None:
                rows = RowRule.parse(None).bind_tensor(flat, pos)
            keep = rows.keep_tensor(flat, pos).reshape(t.shape[:-1])
            if count:
                n_spliced[0] += int(keep.sum())
                n_all[0] += keep.numel()
            out = t.clone()
            out[keep] = fn(t[keep].float()).to(t.dtype)  # only ordinary rows enter the SAE (and any pool in it)
            return out

        return hook_fn

    sae_fn = replace(lambda r: sae(r), count=True)
    zero_fn = replace(lambda t: torch.zeros_like(t))
    ce = {"clean": 0.0, "sae": 0.0, "zero": 0.0}
    kl, kl_zero, n_tok, n_kl = 0.0, 0.0, 0, 0.0
    dev = getattr(model, "device", tokens.device)  # tokens go where the model runs
    tokens, mask = tokens.to(dev), mask.to(dev)
    for i in range(0, len(tokens), batch_size):
        ids, m = tokens[i : i + batch_size], mask[i : i + batch_size]
        clean = model(ids)
        with model.hooks(fwd_hooks=[(hook, sae_fn)]):
            spliced = model(ids)
        key = (i, hook, repr(rows.config()) if rows is not None else None, tokens.shape, int(tokens.sum()))
        lp = clean.log_softmax(-1)
        if cache is None or key not in cache:
            with model.hooks(fwd_hooks=[(hook, zero_fn)]):
                zero = model(ids)
            zero_ce = float(next_token_loss(zero, ids, m))
            zero_kl = float(((lp.exp() * (lp - zero.log_softmax(-1))).sum(-1) * m).sum())
            if cache is not None:
                cache[key] = (zero_ce, zero_kl)
        else:
            zero_ce, zero_kl = cache[key]
        w = m[:, 1:].sum().item()
        for k, lg in (("clean", clean), ("sae", spliced)):
            ce[k] += float(next_token_loss(lg, ids, m)) * w
        ce["zero"] += zero_ce * w
        lq = spliced.log_softmax(-1)
        kl_tok = (lp.exp() * (lp - lq)).sum(-1)  # every position, the last one too (it needs no next token)
        kl += float((kl_tok * m).sum())
        kl_zero += zero_kl
        n_tok += w
        n_kl += float(m.sum())
    ce = {k: v / n_tok for k, v in ce.items()}
    den = ce["zero"] - ce["clean"]
    rec = (ce["zero"] - ce["sae"]) / den if abs(den) > 1e-9 else float("nan")
    return {
        "ce_clean": ce["clean"],
        "ce_sae": ce["sae"],
        "ce_zero": ce["zero"],
        "ce_recovered": rec,
        "kl": kl / n_kl,
        "kl_zero": kl_zero / n_kl,
        "kl_score": 1 - kl / kl_zero if kl_zero > 0 else float("nan"),
        "spliced_frac": n_spliced[0] / max(n_all[0], 1),
        "spliced_row_rule": rows.config() if rows is not None else None,
    }


# ---- ground truth on synthetic data ---------------------------------------------------------------------
def mmcs(sae: Any, directions: Tensor) -> float:
    """Mean over ground-truth directions of the best decoder cosine."""
    D = directions / directions.norm(dim=-1, keepdim=True)
    return float((D @ decoder_directions(sae).T).max(dim=1).values.mean())


def gt_absorption(sae: Any, syn: Any, z: Tensor | None = None, cos_min: float = 0.5) -> dict[str, float]:
    """P(parent latent silent | parent and a child on) - P(silent | parent on, no child), over parents.

    The parent latent is the one whose decoder is closest to the parent's direction (cos > cos_min;
    parents without one count as fully absorbed and are reported in `unmatched`)."""
    z = encode(sae, syn.x) if z is None else z
    cos = syn.directions[syn.info["parents"]] @ decoder_directions(sae).T
    rates, unmatched = [], 0
    for pi, p in enumerate(syn.info["parents"]):
        best, lat = cos[pi].max(0)
        on = syn.active[:, p] > 0
        child = (syn.active[:, syn.info["children"][pi]] > 0).any(1)
        if best < cos_min:
            unmatched += 1
            rates.append(1.0)
            continue
        silent = z[:, lat] <= 0
        a, b = on & child, on & ~child
        if a.sum() == 0 or b.sum() == 0:
            continue
        rates.append(float(silent[a].float().mean() - silent[b].float().mean()))
    return {"absorption": sum(rates) / max(len(rates), 1), "unmatched_parents": unmatched}


def split_count(sae: Any, syn: Any, z: Tensor | None = None, cos_min: float = 0.8, live_min: float = 1e-3) -> float:
    """Mean over split-prone features of the number of live latents with decoder cosine > cos_min (ideal 1)."""
    z = encode(sae, syn.x) if z is None else z
    live = (z > 0).float().mean(0) > live_min
    cos = syn.directions[syn.info["split"]] @ decoder_directions(sae).T
    return float(((cos > cos_min) & live[None]).sum(1).float().mean())


def duplicate_pairs(sae: Any, z: Tensor, cos_min: float = 0.9, live_min: float = 1e-3) -> int:
    """Number of pairs of live latents whose decoder directions have cosine > cos_min."""
    live = ((z > 0).float().mean(0) > live_min).nonzero().flatten()
    W = decoder_directions(sae)[live]
    c = (W @ W.T).triu(1)
    return int((c > cos_min).sum())


# ---- probing ------------------------------------------------------------------------------------------
def logistic_regression(X: Tensor, y: Tensor, C: float = 1.0, iters: int = 100) -> tuple[Tensor, Tensor]:
    """L2 logistic regression (sklearn's objective: C Σ logloss + ½||w||²), L-BFGS on standardised X.
    Returns (w, b) in the original units."""
    X = X.double()
    mu, sd = X.mean(0), X.std(0).clamp_min(1e-8)
    Xs = (X - mu) / sd
    w = torch.zeros(X.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=iters, line_search_fn="strong_wolfe")
    yf = y.double()

    def closure():
        opt.zero_grad()
        loss = (
            C * torch.nn.functional.binary_cross_entropy_with_logits(Xs @ w + b, yf, reduction="sum")
            + 0.5 * w.square().sum()
        )
        loss.backward()
        return loss

    opt.step(closure)
    w_ = (w / sd).detach()
    return w_, (b - (mu / sd * w).sum()).detach()


def f1_score(pred: Tensor, y: Tensor) -> float:
    tp = float((pred & y).sum())
    fp = float((pred & ~y).sum())
    fn = float((~pred & y).sum())
    return 2 * tp / max(2 * tp + fp + fn, 1e-12)


def sparse_probe_f1(z_train: Tensor, y_train: Tensor, z_test: Tensor, y_test: Tensor, k: int = 1) -> dict[str, Any]:
    """SAEBench-style sparse probing for one binary task: pick the k latents with the largest
    |mean_pos - mean_neg| on train, fit a logistic probe on them, report test F1."""
    y_train, y_test = y_train.bool(), y_test.bool()
    diff = (z_train[y_train].float().mean(0) - z_train[~y_train].float().mean(0)).abs()
    top = diff.topk(k).indices
    w, b = logistic_regression(z_train[:, top], y_train)
    pred = (z_test[:, top].double() @ w + b) > 0
    return {
        "f1": f1_score(pred, y_test),
        "accuracy": float((pred == y_test.bool()).float().mean()),
        "latents": top.tolist(),
    }


def mean_w1(z: Tensor, y: Tensor, max_rows: int = 20_000) -> float:
    """Mean over latents of the 1-D Wasserstein distance between the activations on y=1 and y=0 rows.

    W1 scales with the codes: pass codes in input units (`in_input_units(sae, z)`, what `w1_common` does)
    to compare SAEs; on raw codes an SAE with atoms of norm 18 reads 18x smaller than one with unit atoms."""
    from scipy.stats import wasserstein_distance

    y = y.bool()
    z = z.float()
    if len(z) > max_rows:
        idx = torch.randperm(len(z), generator=torch.Generator().manual_seed(0))[:max_rows]
        z, y = z[idx], y[idx]
    pos, neg = z[y].cpu().numpy(), z[~y].cpu().numpy()  # (GPU tensors too)
    if not len(pos) or not len(neg):
        raise ValueError("mean_w1 needs rows of both classes")
    return float(sum(wasserstein_distance(pos[:, j], neg[:, j]) for j in range(z.shape[1])) / z.shape[1])


def w1_common(sae: Any, z: Tensor, y: Tensor, max_rows: int = 20_000) -> float:
    """`mean_w1` on codes in input units (codes x atom norm): invariant to how the decoder is normalised."""
    return mean_w1(in_input_units(sae, z), y, max_rows)


# ---- PolySAE: interactions vs co-occurrence -------------------------------------------------------------
def _spearman(a: Tensor, b: Tensor) -> float:
    from scipy.stats import spearmanr

    r = spearmanr(a.double().cpu().numpy(), b.double().cpu().numpy()).statistic
    return float(r) if r == r else 0.0


def _auroc(scores: Tensor, labels: Tensor) -> float:
    labels = labels.bool()
    pos, neg = scores[labels], scores[~labels]
    if not len(pos) or not len(neg):
        return float("nan")
    ranks = torch.empty(len(scores), dtype=torch.float64)
    ranks[scores.argsort()] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    return float((ranks[labels].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def match_latents(sae: Any, directions: Tensor) -> list[int]:
    """Hungarian matching of ground-truth directions to latents by decoder cosine."""
    from scipy.optimize import linear_sum_assignment

    cos = (directions / directions.norm(dim=-1, keepdim=True)) @ decoder_directions(sae).T
    _, cols = linear_sum_assignment(-cos.cpu().numpy())
    return [int(c) for c in cols]


def interaction_specificity(sae: Any, syn: Any, z: Tensor | None = None) -> dict[str, float]:
    """For the compositional toy: match atoms to latents, then over atom pairs compare a pair statistic
    with co-occurrence N_ij and with membership in P. PolySAE's statistic is S_ij = |λ2| ||B_ij||; a
    linear SAE's is the covariance of the two latents' codes (the paper's comparison)."""
    z = encode(sae, syn.x) if z is None else z
    lat = match_latents(sae, syn.directions)
    n_atoms = syn.directions.shape[0]
    on = syn.active > 0
    pairs = [(i, j) for i in range(n_atoms) for j in range(i + 1, n_atoms)]
    P, PQ = set(map(tuple, syn.info["P"])), set(map(tuple, syn.info["P"])) | set(map(tuple, syn.info["Q"]))
    N = torch.tensor([float((on[:, i] & on[:, j]).sum()) for i, j in pairs])
    if hasattr(sae, "interaction_strength"):
        S_all = sae.interaction_strength()
        S = torch.tensor([float(S_all[lat[i], lat[j]]) for i, j in pairs])
        name = "interaction"
    else:
        zc = z[:, lat].float() - z[:, lat].float().mean(0)
        cov = zc.T @ zc / len(zc)
        S = torch.tensor([float(cov[i, j]) for i, j in pairs])
        name = "covariance"
    in_p = torch.tensor([p in P for p in pairs])
    in_pq = torch.tensor([p in PQ for p in pairs])
    return {
        "statistic": name,
        "auroc_P": _auroc(S, in_p),
        "spearman_with_cooccurrence_PQ": _spearman(S[in_pq], N[in_pq]),
        "spearman_with_cooccurrence_all": _spearman(S, N),
    }


def compound_fvu(sae: Any, syn: Any) -> dict[str, float]:
    """FVU overall and on the samples where a compositional pair is active."""
    with torch.no_grad():
        sae.eval()
        xh = torch.cat([sae(syn.x[i : i + 4096]) for i in range(0, len(syn.x), 4096)])
    err = (xh - syn.x).square().sum(1)
    var = (syn.x - syn.x.mean(0)).square().sum(1)
    c = syn.info["compound"]
    return {"fvu": float(err.sum() / var.sum()), "fvu_compound": float(err[c].sum() / var[c].sum())}


def monolithic_compound_latents(sae: Any, syn: Any, cos_min: float = 0.6) -> int:
    """Latents whose linear direction has cosine > cos_min to normalize(d_i + d_j + e_ij) of a pair in P."""
    W = decoder_directions(sae)
    hits = torch.zeros(W.shape[0], dtype=torch.bool)
    for (i, j), e in zip(syn.info["P"], syn.info["binding"]):
        v = syn.directions[i] + syn.directions[j] + e
        hits |= (W @ (v / v.norm())) > cos_min
    return int(hits.sum())


# ---- coherence ----------------------------------------------------------------------------------------
def coherence_metrics(
    z: Tensor, theta: Tensor | None = None, component: Tensor | None = None, batch: int = 256
) -> dict[str, float]:
    """Locality/covering (means of the normalised coherence quantities over batches of `batch` rows) and,
    for data on circles, %tuned (latents whose mean resultant length on their main circle exceeds 0.5)
    and %pure (|mass on circle 0 - mass on circle 1| / mass > 0.5), over latents that fire."""
    from sae.coherence import locality

    locs = [locality(z[i : i + batch]) for i in range(0, len(z) - batch + 1, batch)] or [locality(z)]
    out = {k: sum(d[k] for d in locs) / len(locs) for k in ("locality", "covering")}
    if theta is not None and component is not None:
        z = z.float()
        mass = torch.stack([z[component == c].sum(0) for c in (0, 1)])  # [2, L]
        alive = mass.sum(0) > 0
        main = mass.argmax(0)
        e = torch.stack([torch.cos(theta), torch.sin(theta)], 1)  # [n, 2]
        mrl = torch.zeros(z.shape[1])
        for c in (0, 1):
            sel = component == c
            res = (z[sel].T @ e[sel]).norm(dim=1) / z[sel].sum(0).clamp_min(1e-12)
            mrl = torch.where(main == c, res, mrl)
        purity = (mass[0] - mass[1]).abs() / mass.sum(0).clamp_min(1e-12)
        out["tuned_frac"] = float((mrl[alive] > 0.5).float().mean())
        out["pure_frac"] = float((purity[alive] > 0.5).float().mean())
        out["alive"] = int(alive.sum())
    return out


# ---- first-letter task on a real model ------------------------------------------------------------------
def first_letter_words(
    tokenizer: Any, letters: str = "abcdefghijklmnopqrstuvwxyz", min_len: int = 3, limit: int = 4000, seed: int = 0
) -> list[tuple[int, str]]:
    """(token id, word) for vocabulary tokens that are a space followed by a lowercase word."""
    out = []
    for tid in range(tokenizer.vocab_size if hasattr(tokenizer, "vocab_size") else len(tokenizer)):
        s = tokenizer.decode([tid])
        w = s[1:] if s.startswith(" ") else None
        if w and len(w) >= min_len and w.isalpha() and w.isascii() and w.islower() and w[0] in letters:
            out.append((tid, w))
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(out), generator=g)[:limit].tolist()
    return [out[i] for i in sorted(idx)]


@torch.no_grad()
def word_activations(
    model: Any, hook: str, words: Sequence[tuple[int, str]], prefix: str = "The word is", batch: int = 64
) -> Tensor:
    """Activation at `hook` on the word's token, after a short prefix (rows in the order of `words`)."""
    pre = model.to_tokens(prefix)
    pre = pre[0]
    rows = []
    for i in range(0, len(words), batch):
        ids = torch.stack([torch.cat([pre, torch.tensor([t])]) for t, _ in words[i : i + batch]])
        _, cache = model.run_with_cache(ids, names=[hook], return_logits=False)
        rows.append(cache[hook][:, -1].float())
    return torch.cat(rows)


FIRST_LETTER_MIN_WORDS = 20
"""Words a letter needs to be one of the first-letter task's letters (besides 5 in training, 3 in the test split)."""


def first_letter_split(
    words: Sequence[tuple[int, str]], letters: str | None = None, seed: int = 0
) -> tuple[str, dict[str, Tensor], Tensor, Tensor, torch.Generator]:
    """The first-letter task's plan for `words`: (the letters it scores, each letter's labels, the seeded train and
    test positions, the generator that goes on to draw the negatives). A letter is scored when it has
    `FIRST_LETTER_MIN_WORDS` words, 5 of them in training and 3 in the test split. Cheap: no activations, so a
    command checks it before running anything."""
    first = [w[0] for _, w in words]
    letters = letters or "".join(sorted({c for c in first if first.count(c) >= FIRST_LETTER_MIN_WORDS}))
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(words), generator=g)
    tr_all, te_all = perm[: len(perm) * 7 // 10], perm[len(perm) * 7 // 10 :]
    y_all = {L: torch.tensor([c == L for c in first], dtype=torch.bool) for L in letters}
    usable = "".join(L for L in letters if y_all[L][tr_all].sum() >= 5 and y_all[L][te_all].sum() >= 3)
    return usable, y_all, tr_all, te_all, g


def saebench_absorption(
    x: Tensor,
    z: Tensor,
    W: Tensor,
    p: Tensor,
    main: Sequence[int],
    full_cos: float = 0.025,
    fraction_cos: float = 0.1,
    proportion: float = 0.4,
    max_absorbers: int = 3,
) -> dict[str, float]:
    """SAEBench's two absorption measures (`evals/absorption/feature_absorption_calculator.py`) over the probe's
    true positives of one letter: activations `x` [n, d], codes `z` [n, d_sae], unit decoder rows `W`, unit
    probe direction `p`, the split latents `main`.

    A latent's probe projection is its activation times the cosine of its decoder row with the probe.
    Absorption fraction of a word: 0 when the main latents already carry the model's projection x·p or the
    top `max_absorbers` other latents (cosine ≥ `fraction_cos`, positive projection) carry under `proportion`
    of it; 1 when the main latents' projection is ≤ 0; else absorbed / (absorbed + main), absorbed being the
    absorbers' projection capped at what the main latents leave unexplained. Full absorption: every main
    latent silent (< 1e-8), the latent of largest projection has cosine ≥ `full_cos` and carries at least
    `proportion` of a non-negative x·p. Both are averaged over the words, as SAEBench's per-letter rates."""
    n = len(x)
    if n == 0:
        return {"absorption_fraction": 0.0, "full_absorption_rate": 0.0, "n_saebench_full_absorption": 0}
    cos = W @ p
    proj = z * cos  # [n, d_sae]
    act = x @ p  # [n]
    main_t = torch.as_tensor(list(main), dtype=torch.long)
    main_proj = proj[:, main_t].sum(1)
    cand = (cos >= fraction_cos).expand_as(proj) & (proj > 0)
    cand[:, main_t] = False
    absorbers = torch.where(cand, proj, torch.zeros_like(proj)).topk(min(max_absorbers, proj.shape[1]), dim=1)
    total = absorbers.values.sum(1)
    unexplained = act - main_proj
    absorbed = torch.minimum(total, unexplained)
    frac = (absorbed / (absorbed + main_proj)).clamp(0.0, 1.0)
    frac = torch.where(main_proj <= 0, torch.ones_like(frac), frac)
    frac = torch.where((main_proj >= act) | (total / act < proportion), torch.zeros_like(frac), frac)
    top_proj, top = proj.max(1)
    full = (z[:, main_t] < 1e-8).all(1) & (cos[top] >= full_cos) & (act >= 0) & (top_proj / act >= proportion)
    return {
        "absorption_fraction": float(frac.mean()),
        "full_absorption_rate": float(full.float().mean()),
        "n_saebench_full_absorption": int(full.sum()),
    }


def first_letter_absorption(
    x: Tensor,
    words: Sequence[tuple[int, str]],
    sae: Any,
    letters: str | None = None,
    cos_min: float = 0.025,
    split_gain: float = 0.03,
    k_max: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """Chanin et al.'s first-letter task, simplified (balanced one-vs-rest sets per letter): for each letter, a logistic
    probe on the model's
    activations gives the feature direction; the SAE's main latent is the k=1 sparse-probing choice.
    Absorption rate: of the test words of that letter the probe gets right, the fraction where the
    main latent is silent while another active latent's decoder points along the probe (cos > cos_min).
    Splitting: how many latents k-sparse probing adds while each raises F1 by more than `split_gain`.
    Beside this rate, SAEBench's absorption fraction and full-absorption rate (`saebench_absorption`) with the
    split latents as the main ones."""
    usable, y_all, tr_all, te_all, g = first_letter_split(words, letters, seed)
    z = encode(sae, x)
    W = decoder_directions(sae)
    tr, te = tr_all, te_all
    per = {}
    for L in usable:
        y = y_all[L]

        # balanced one-vs-rest, as in SAEBench's probing sets: as many random negatives as positives
        def balanced(split: Tensor) -> Tensor:
            pos, neg = split[y[split]], split[~y[split]]  # noqa: B023
            return torch.cat([pos, neg[torch.randperm(len(neg), generator=g)[: len(pos)]]])

        tr, te = balanced(tr_all), balanced(te_all)
        w, b = logistic_regression(x[tr], y[tr])
        probe_pred = (x[te].double() @ w + b) > 0
        probe_ok = probe_pred & y[te]
        f1s, accs, n_split = [], [], 1
        for k in range(1, k_max + 1):
            r = sparse_probe_f1(z[tr], y[tr], z[te], y[te], k)
            f1s.append(r["f1"])
            accs.append(r["accuracy"])
        for k in range(1, k_max):
            if f1s[k] - f1s[k - 1] > split_gain:
                n_split += 1
            else:
                break
        main = sparse_probe_f1(z[tr], y[tr], z[te], y[te], 1)["latents"][0]
        p = (w / w.norm()).float()
        along = (W @ p) > cos_min
        along[main] = False
        zt = z[te][probe_ok]
        absorbed = (zt[:, main] <= 0) & ((zt[:, along] > 0).any(1))
        split = sparse_probe_f1(z[tr], y[tr], z[te], y[te], n_split)["latents"]
        sb = saebench_absorption(x[te][probe_ok].float(), zt, W, p, split, cos_min)
        per[L] = {
            **sb,
            "absorption": float(absorbed.float().mean()) if len(zt) else 0.0,
            "n_split": n_split,
            "f1_k1": f1s[0],
            "accuracy_k": accs,
            "probe_accuracy": float((probe_pred == y[te]).float().mean()),
            "n_probe_true_positives": int(probe_ok.sum()),
            "n_full_absorption": int(absorbed.sum()),
        }
    if not per:
        raise ValueError("no letter had enough words for the first-letter task")
    return {
        "mean_absorption": sum(v["absorption"] for v in per.values()) / len(per),
        "mean_absorption_fraction": sum(v["absorption_fraction"] for v in per.values()) / len(per),
        "mean_full_absorption": sum(v["full_absorption_rate"] for v in per.values()) / len(per),
        "mean_num_split": sum(v["n_split"] for v in per.values()) / len(per),
        "mean_f1_k1": sum(v["f1_k1"] for v in per.values()) / len(per),
        "letters": per,
    }


def round_dict(d: dict[str, Any], digits: int = 4) -> dict[str, Any]:
    return {k: (round(v, digits) if isinstance(v, float) and math.isfinite(v) else v) for k, v in d.items()}
