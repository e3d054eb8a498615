"""Every attribution method we have, scored on an LDS task: helpfulness [n_train, n_query] (positive = lowers the loss).

Each function takes the task's final model (`model`, an `interp.HookedModel`), its learning-rate weighted
checkpoints, the training and query tokens, and returns scores whose sign is the harness's (`attribution.lds`).

| name | what it computes |
|---|---|
| `tracin` | sum_k eta_k <grad l(w_k; z), grad l(w_k; q)> over the full run's checkpoints, exact gradients |
| `sdi` | the looped model's step-decomposed influence summed over steps (= TracIn on the body, TensorSketched) |
| `grad_dot`, `grad_cos` | gradient dot product / cosine at the final weights |
| `trak` | TRAK-style: Gaussian random projection P of the gradients, then P_z^T (P^T P + lambda I)^-1 P_q |
| `ekfac`, `ekfac_block`, `ekfac_module` | our EK-FAC on every head's q|k, v, o blocks (heads block-diagonal), |
| | damped per head (the default), per block or per module (`attribution.influence.DAMPING_SCOPES`) |
| `ekfac_linear` (`_attn`, `_mlp`) | our EK-FAC over every Linear in the layers (or the attention / MLP ones), one |
| | Kronecker block per module, damped 0.1 x mean eigenvalue per module (`attribution.ekfac_linear`) |
| `dra` | DRA's representation similarity: cosine of centred mean-pooled hidden states (middle layer) |
| `kronfluence` | Kronfluence 1.0.1's EK-FAC over every Linear in the layers, its per-module heuristic damping |
| `dattri_trak` | dattri 0.3.0's TRAK (`TRAKAttributor`) on the final model with its defaults: every parameter, the |
| | margin log p / (1 - p) of the sequence's mean-token probability, projection to 512, one model |

Gradients cover the Linear modules inside the layers (for the looped GPT: the shared block's), the same
parameter set for TracIn, gradient similarity, TRAK and `ekfac_linear`; `ekfac` covers the attention heads' only.
The two anchors (`kronfluence`, `dattri_trak`) run only when their packages are importable (`ANCHORS` says why not).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

METHODS: dict[str, Callable] = {}


def method(name: str):
    def register(fn):
        if name in METHODS:
            raise ValueError(f"LDS method {name!r} is registered twice")
        METHODS[name] = fn
        return fn

    return register


def _groups(model):
    hf = model.hf_model
    if hasattr(hf, "step_modules"):
        return hf.step_modules()
    return {n: [m] for n, m in hf.named_modules() if isinstance(m, torch.nn.Linear) and ".layers." in n}


def _final_features(model, ids: Tensor, batch: int = 32) -> Tensor:
    """Exact per-example gradients [n, n_params] at the model's weights (summed over loop steps)."""
    from attribution.capture import GradientFeaturizer
    from attribution.tracin import features

    return (
        features(model.hf_model, GradientFeaturizer(_groups(model), sketch_dim=None), ids, None, batch).sum(1).double()
    )


@method("tracin")
def tracin_scores(model, checkpoints, train, queries, **_) -> Tensor:
    from attribution.capture import GradientFeaturizer
    from attribution.tracin import tracin

    return tracin(
        model.hf_model, checkpoints, GradientFeaturizer(_groups(model)), train, queries, batch_size=32
    ).double()


@method("sdi")
def sdi_scores(model, checkpoints, train, queries, seed: int = 0, **_) -> Tensor:
    from attribution.sdi import step_decomposed_influence

    if not hasattr(model.hf_model, "step_modules"):
        raise ValueError("SDI needs a looped model (the looped task)")
    res = step_decomposed_influence(
        model.hf_model, checkpoints, train, queries, sketch_dim=2048, seed=seed, batch_size=32
    )
    return res.sdi.sum(-1).double()


@method("grad_dot")
def grad_dot(model, checkpoints, train, queries, **_) -> Tensor:
    return _final_features(model, train) @ _final_features(model, queries).T


@method("grad_cos")
def grad_cos(model, checkpoints, train, queries, **_) -> Tensor:
    ftr, fq = _final_features(model, train), _final_features(model, queries)
    return torch.nn.functional.normalize(ftr, dim=1) @ torch.nn.functional.normalize(fq, dim=1).T


@method("trak")
def trak_scores(
    model, checkpoints, train, queries, seed: int = 0, proj_dim: int = 512, ridge: float = 1e-2, **_
) -> Tensor:
    """One model, no ensemble: projected gradients with the projected Gauss-Newton inverse (TRAK's kernel)."""
    return trak_kernel(_final_features(model, train), _final_features(model, queries), seed, proj_dim, ridge)


def trak_kernel(ftr: Tensor, fq: Tensor, seed: int = 0, proj_dim: int = 512, ridge: float = 1e-2) -> Tensor:
    """[n_train, n_query] from per-example gradients [n, n_params]: a seeded Gaussian projection to `proj_dim`,
    then P_z^T (P^T P + ridge * mean eigenvalue * I)^-1 P_q."""
    g = torch.Generator().manual_seed(seed)
    proj = torch.randn(ftr.shape[1], proj_dim, generator=g, dtype=torch.float64) / proj_dim**0.5
    ptr, pq = ftr @ proj, fq @ proj
    gram = ptr.T @ ptr
    gram += ridge * gram.trace() / proj_dim * torch.eye(proj_dim, dtype=torch.float64)
    return ptr @ torch.linalg.solve(gram, pq.T)


def _ekfac(
    model, train, queries, scope: str, seed: int = 0, fit_rows: int = 256, damping: float = 0.1, batch: int = 32
) -> Tensor:
    from attribution.influence import HeadComponent, component_gradients, fit_ekfac, lm_loss

    if hasattr(model.hf_model, "step_modules"):
        raise ValueError("our EK-FAC scores head components of distinct layers; the looped GPT shares them")
    total = torch.zeros(len(train), len(queries), dtype=torch.float64)
    for layer in range(model.n_layers):
        for head in range(model.n_heads):
            comp = HeadComponent(layer, head, "qkvo")
            f = fit_ekfac(
                model, comp, train[:fit_rows], batch_size=batch, seed=seed, damping_alpha=damping, damping_scope=scope
            )
            q = component_gradients(model, comp, queries, None, lm_loss)
            ihvp = f.inverse_hvp(q)
            for i in range(0, len(train), batch):
                g = component_gradients(model, comp, train[i : i + batch], None, lm_loss)
                total[i : i + batch] += sum(torch.einsum("boi,qoi->bq", g[k], ihvp[k]) for k in g).double()
    return total


@method("ekfac")
def ekfac_head(model, checkpoints, train, queries, **kw) -> Tensor:
    return _ekfac(model, train, queries, "head", **_ekfac_kw(kw))


@method("ekfac_block")
def ekfac_block(model, checkpoints, train, queries, **kw) -> Tensor:
    return _ekfac(model, train, queries, "block", **_ekfac_kw(kw))


@method("ekfac_module")
def ekfac_module(model, checkpoints, train, queries, **kw) -> Tensor:
    return _ekfac(model, train, queries, "module", **_ekfac_kw(kw))


def _ekfac_kw(kw: dict, keys: tuple[str, ...] = ("seed", "fit_rows", "damping")) -> dict:
    return {k: kw[k] for k in keys if k in kw}


def _ekfac_linear(
    model, train, queries, group: str, seed: int = 0, fit_rows: int = 256, batch: int = 16, label_samples: int = 1
) -> Tensor:
    from attribution.ekfac_linear import fit_linear_ekfac, linear_influence, linear_modules

    if hasattr(model.hf_model, "step_modules"):
        raise ValueError("per-module EK-FAC needs each Linear called once; the looped GPT calls its block per step")
    mods = linear_modules(model)
    if group != "all":
        words = ("attn", "attention") if group == "attn" else ("mlp",)
        mods = {n: m for n, m in mods.items() if any(w in n.split(".")[-2] for w in words)}
    f = fit_linear_ekfac(model, mods, train[:fit_rows], batch_size=batch, seed=seed, label_samples=label_samples)
    return -linear_influence(model, f, mods, train, queries, batch_size=batch)  # the harness's sign: helpfulness


@method("ekfac_linear")
def ekfac_linear(model, checkpoints, train, queries, **kw) -> Tensor:
    return _ekfac_linear(model, train, queries, "all", **_ekfac_kw(kw, ("seed", "fit_rows")))


@method("ekfac_linear_attn")
def ekfac_linear_attn(model, checkpoints, train, queries, **kw) -> Tensor:
    return _ekfac_linear(model, train, queries, "attn", **_ekfac_kw(kw, ("seed", "fit_rows")))


@method("ekfac_linear_mlp")
def ekfac_linear_mlp(model, checkpoints, train, queries, **kw) -> Tensor:
    return _ekfac_linear(model, train, queries, "mlp", **_ekfac_kw(kw, ("seed", "fit_rows")))


@method("dra")
def dra_similarity(model, checkpoints, train, queries, **_) -> Tensor:
    from attribution.dra import hidden_representations

    hook = f"blocks.{model.n_layers // 2}.hook_resid_post"
    with torch.no_grad():
        rtr = hidden_representations(model, train, torch.ones_like(train), hook).double()
        rq = hidden_representations(model, queries, torch.ones_like(queries), hook).double()
    mu = rtr.mean(0)
    n = torch.nn.functional.normalize
    return n(rtr - mu, dim=1) @ n(rq - mu, dim=1).T


def kronfluence_available() -> str | None:
    """None when Kronfluence imports, else why not (shown when its row is skipped)."""
    try:
        import kronfluence  # noqa: F401
    except ImportError as e:
        return f"kronfluence is not importable ({e}); install it outside the project (attribution/README.md, LDS)"
    return None


def dattri_available() -> str | None:
    """None when dattri imports, else why not (shown when its row is skipped)."""
    try:
        import dattri.algorithm.trak  # noqa: F401
    except ImportError as e:
        return f"dattri is not importable ({e}); install it outside the project (attribution/README.md, LDS)"
    return None


ANCHORS: dict[str, Callable[[], str | None]] = {"kronfluence": kronfluence_available, "dattri_trak": dattri_available}
"""The methods that come from other projects' packages: name -> why it cannot run here (None: it can)."""


def dattri_trak_run(model, log_p, train_loader, query_loader, proj_dim: int = 512, seed: int = 0) -> Tensor:
    """dattri's TRAK [n_train, n_query] (positive = helpful) over `log_p(params, example)`, the log-probability of
    an example's answer: TRAK's output function, the margin log p / (1 - p), for training rows and queries alike,
    its `1 - p` weights, its projection to `proj_dim` (seeded) and its kernel inverse without regularisation."""
    from dattri.algorithm.trak import TRAKAttributor
    from dattri.task import AttributionTask

    def margin(params, data):
        lp = log_p(params, data)
        return lp - torch.log1p(-torch.exp(lp))

    task = AttributionTask(loss_func=margin, model=model, checkpoints=model.state_dict())
    proj = {"proj_dim": proj_dim, "proj_seed": seed, "device": "cpu"}
    trak = TRAKAttributor(task, lambda p, d: torch.exp(log_p(p, d)), projector_kwargs=proj, device="cpu")
    with torch.no_grad():  # dattri's own examples call it so; its gradients come from torch.func
        trak.cache(train_loader)
        return trak.attribute(query_loader).double()


@method("dattri_trak")
def dattri_trak_scores(model, checkpoints, train, queries, seed: int = 0, proj_dim: int = 512, **_) -> Tensor:
    """dattri's TRAK on the final model, its defaults: gradients of every parameter, p = exp(-mean token loss) as
    in dattri's GPT-2 example (`dattri_trak_run`), one model."""
    from torch.func import functional_call
    from torch.utils.data import DataLoader

    hf = model.hf_model.eval()

    def log_p(params, ids):
        ids = ids.unsqueeze(0)
        return -functional_call(hf, params, (ids,), {"labels": ids}).loss

    batches = [DataLoader(rows, batch_size=64) for rows in (train, queries)]
    return dattri_trak_run(hf, log_p, *batches, proj_dim, seed)


@method("kronfluence")
def kronfluence_scores(model, checkpoints, train, queries, fit_rows: int = 256, workdir: str = "", **_) -> Tensor:
    """Kronfluence's EK-FAC (factors on `fit_rows` training rows with sampled labels, heuristic damping)."""
    import copy
    import tempfile

    import torch.nn.functional as F
    from kronfluence.analyzer import Analyzer, prepare_model
    from kronfluence.arguments import FactorArguments, ScoreArguments
    from kronfluence.task import Task

    modules = list(_groups(model))
    if hasattr(model.hf_model, "step_modules"):
        raise ValueError("Kronfluence factors modules called once; the looped GPT calls its block once per step")

    class LMTask(Task):
        def compute_train_loss(self, batch, model, sample=False):
            logits = model(input_ids=batch).logits[:, :-1].float().flatten(0, 1)
            labels = batch[:, 1:].flatten()
            if sample:
                with torch.no_grad():
                    labels = torch.multinomial(logits.softmax(-1), 1).flatten()
            return F.cross_entropy(logits, labels, reduction="sum")

        def compute_measurement(self, batch, model):
            return self.compute_train_loss(batch, model)

        def get_influence_tracked_modules(self):
            return modules

    class Rows(torch.utils.data.Dataset):
        def __init__(self, t):
            self.t = t

        def __len__(self):
            return len(self.t)

        def __getitem__(self, i):
            return self.t[i]

    task = LMTask()
    hf = prepare_model(copy.deepcopy(model.hf_model).eval(), task)
    # the prefix: a folder a killed run leaves in the LDS folder is known as ours (`lds_run.KRONFLUENCE_TMP`)
    with tempfile.TemporaryDirectory(dir=workdir or None, prefix=".kronfluence-") as tmp:
        an = Analyzer("lds", hf, task, cpu=True, disable_tqdm=True, output_dir=tmp)
        an.fit_all_factors(
            "ekfac",
            Rows(train[:fit_rows]),
            per_device_batch_size=32,
            factor_args=FactorArguments(strategy="ekfac"),
            overwrite_output_dir=True,
        )
        an.compute_pairwise_scores(
            "s",
            "ekfac",
            Rows(queries),
            Rows(train),
            per_device_query_batch_size=32,
            per_device_train_batch_size=64,
            score_args=ScoreArguments(damping_factor=None),
            overwrite_output_dir=True,
        )
        scores = an.load_pairwise_scores("s")["all_modules"]
    return scores.T.double()  # Kronfluence: [query, train], positive = helpful for a loss measurement
