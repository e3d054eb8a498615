"""Weight-sparse transformers (Gao et al., OpenAI 2025): training with a per-matrix top-k weight projection.

After every optimiser step, every weight matrix keeps only its largest-|w| entries, the same fraction
L0 of each matrix, never leaving a neuron (row) with fewer than `min_per_neuron` nonzeros; biases keep
the same fraction. L0 is annealed linearly from dense (1.0) to the target between `anneal_start`
(1%, as in the authors' code) and `anneal_end` (50%) of training. Activations go through AbsTopK
(keep the top quarter of |x|) at the MLP neurons and the attention and MLP outputs. The optimiser is
Adam with eps = 0.1, decoupled weight decay on matrices, the gradient's RMS clipped to 1, 1% warm-up
then linear decay.

The model is a small GPT-NeoX (`transformers.GPTNeoXForCausalLM`, byte-level vocabulary) wrapped as an
`interp.HookedModel`, so the toolkit's hooks, circuits and checkpoints work on it unchanged. What the
paper has and this does not: RMSNorm (GPT-NeoX uses LayerNorm), a learnable attention sink, the
dense bigram table, and AbsTopK on the q/k/v and residual reads (see circuits/README.md).

    cfg = WeightSparseConfig(l0=1/16, steps=1500)
    model, report = train_weight_sparse(cfg, texts)
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn
from interp.infra import logs

from interp.infra.checks import require_numbers
import interp
from interp.data import byte_tokenizer

ABSTOPK_LOCATIONS = ("mlp_neuron", "attn_out", "mlp_out")


@dataclass
class WeightSparseConfig:
    """Model shape, sparsity and optimiser settings of a weight-sparse (or, with l0=1, dense) run."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    """d_head = d_model / n_heads (16 at the defaults, the paper's small heads)."""
    d_mlp: int = 256
    ctx_len: int = 64
    l0: float = 1 / 16
    """Target fraction of nonzero entries per matrix (1.0: a dense model)."""
    min_per_neuron: int = 4
    """Never keep fewer nonzeros than this in a row (output neuron) of a matrix."""
    anneal_start: float = 0.01
    anneal_end: float = 0.5
    afrac: float = 0.25
    """AbsTopK keeps this fraction of |activations| at each location (0: no AbsTopK)."""
    abstopk_locations: tuple[str, ...] = ABSTOPK_LOCATIONS
    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    eps: float = 0.1
    weight_decay: float = 0.01
    warmup: float = 0.01
    grad_rms_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        require_numbers(self, positive_int=("d_model", "n_layers", "n_heads", "d_mlp", "ctx_len", "steps", "batch_size",
                                            "min_per_neuron"),
                        positive=("lr", "eps"), non_negative=("weight_decay", "grad_rms_clip"))
        if not 0 <= self.afrac <= 1 or not 0 <= self.warmup <= 1:
            raise ValueError(f"afrac and warmup are fractions in [0, 1], got {self.afrac}, {self.warmup}")
        if not 0 < self.l0 <= 1:
            raise ValueError(f"l0 must be in (0, 1], got {self.l0}")
        if not 0 <= self.anneal_start <= self.anneal_end <= 1:
            raise ValueError("need 0 <= anneal_start <= anneal_end <= 1")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        unknown = set(self.abstopk_locations) - set(ABSTOPK_LOCATIONS)
        if unknown:
            raise ValueError(f"unknown AbsTopK locations {sorted(unknown)}; known: {', '.join(ABSTOPK_LOCATIONS)}")


# ---------------------------------------------------------------------- activation sparsity
def abs_topk(x: Tensor, k: int) -> Tensor:
    """Keep the k entries of largest |x| along the last dimension, zero the rest."""
    if k >= x.shape[-1]:
        return x
    idx = x.abs().topk(k, dim=-1).indices
    return torch.zeros_like(x).scatter(-1, idx, x.gather(-1, idx))


class AbsTopKAct(nn.Module):
    """An activation function followed by AbsTopK (replaces `mlp.act`; it has no parameters)."""

    def __init__(self, act: nn.Module, k: int):
        super().__init__()
        self.act, self.k = act, k

    def forward(self, x: Tensor) -> Tensor:
        return abs_topk(self.act(x), self.k)


class AbsTopKLinear(nn.Linear):
    """A Linear whose output goes through AbsTopK; same parameter names, so checkpoints load unchanged."""

    k: int = 0

    def forward(self, x: Tensor) -> Tensor:
        return abs_topk(super().forward(x), self.k)


def _wrap_linear(lin: nn.Linear, k: int) -> AbsTopKLinear:
    lin.__class__ = AbsTopKLinear  # keeps the very parameters (and their optimiser state)
    lin.k = k
    return lin


def install_abstopk(hf_model, afrac: float, locations=ABSTOPK_LOCATIONS) -> None:
    """Put AbsTopK at the given locations of a GPT-NeoX model and record it in its config."""
    if afrac <= 0:
        return
    c = hf_model.config
    if c.model_type != "gpt_neox":
        raise ValueError(f"AbsTopK is installed on GPT-NeoX models only, not {c.model_type!r}")
    k_mlp, k_d = max(1, round(afrac * c.intermediate_size)), max(1, round(afrac * c.hidden_size))
    for layer in hf_model.gpt_neox.layers:
        if "mlp_neuron" in locations and not isinstance(layer.mlp.act, AbsTopKAct):
            layer.mlp.act = AbsTopKAct(layer.mlp.act, k_mlp)
        if "attn_out" in locations:
            _wrap_linear(layer.attention.dense, k_d)
        if "mlp_out" in locations:
            _wrap_linear(layer.mlp.dense_4h_to_h, k_d)
    c.abstopk_frac = afrac
    c.abstopk_locations = list(locations)


# ---------------------------------------------------------------------- weight sparsity
def l0_schedule(step: int, total: int, target: float, start: float = 0.01, end: float = 0.5) -> float:
    """Fraction of nonzero weights at `step`: 1 until start*total, linear to `target` at end*total."""
    t = step / max(total, 1)
    if t <= start:
        return 1.0
    if t >= end:
        return target
    return 1.0 + (target - 1.0) * (t - start) / (end - start)


@torch.no_grad()
def project_topk_(w: Tensor, frac: float, min_per_row: int = 0) -> int:
    """Zero all but the ceil(frac * numel) largest-|w| entries of `w`, in place; returns the count kept.

    A 2-D matrix first keeps the `min_per_row` largest entries of every row (so the total can exceed
    the budget when the minimum alone does); the rest of the budget goes to the largest remaining entries.
    """
    if frac >= 1:
        return w.numel()
    k = max(1, math.ceil(frac * w.numel()))
    a = w.abs()
    keep = torch.zeros_like(w, dtype=torch.bool)
    if w.ndim == 2 and min_per_row > 0:
        idx = a.topk(min(min_per_row, w.shape[1]), dim=1).indices
        keep.scatter_(1, idx, True)
    rest = k - int(keep.sum())
    if rest > 0:
        scores = a.masked_fill(keep, -1.0).flatten()
        keep.view(-1)[scores.topk(rest).indices] = True
    w.mul_(keep)
    return int(keep.sum())


def sparse_parameters(hf_model) -> list[tuple[str, nn.Parameter]]:
    """Parameters the projection applies to: every matrix (embeddings included) and every Linear bias."""
    out = []
    for name, p in hf_model.named_parameters():
        if p.ndim == 2 or (name.endswith(".bias") and "norm" not in name):
            out.append((name, p))
    return out


def project_model_(hf_model, frac: float, min_per_neuron: int) -> dict[str, int]:
    return {n: project_topk_(p.data, frac, min_per_neuron if p.ndim == 2 else 0) for n, p in sparse_parameters(hf_model)}


# ---------------------------------------------------------------------- model and training
def build_model(cfg: WeightSparseConfig) -> interp.HookedModel:
    """A fresh GPT-NeoX of the config's shape over the byte vocabulary, AbsTopK installed."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    hf_cfg = GPTNeoXConfig(
        vocab_size=257, hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_mlp, max_position_embeddings=cfg.ctx_len, hidden_act="gelu",
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        use_parallel_residual=False, tie_word_embeddings=False, bos_token_id=256, eos_token_id=256,
        architectures=["GPTNeoXForCausalLM"],
    )
    hf_cfg._attn_implementation = "eager"
    torch.manual_seed(cfg.seed)
    hf = GPTNeoXForCausalLM(hf_cfg)
    install_abstopk(hf, cfg.afrac, cfg.abstopk_locations)
    hf.config.weight_sparse = {"l0": cfg.l0, "min_per_neuron": cfg.min_per_neuron}
    return interp.HookedModel(hf, byte_tokenizer(), {"spec": f"weight-sparse gpt_neox l0={cfg.l0:g}" if cfg.l0 < 1 else "dense gpt_neox",
                                                            "source": "built by circuits.finders.weight_sparse"})


def lr_factor(step: int, total: int, warmup: float) -> float:
    w = max(1, round(warmup * total))
    return (step + 1) / w if step < w else max(0.0, (total - step) / max(1, total - w))


@dataclass
class TrainReport:
    losses: list = field(default_factory=list)
    final_loss: float = float("nan")
    val_loss: float = float("nan")
    nonzero_fraction: float = 1.0
    seconds: float = 0.0
    config: dict = field(default_factory=dict)


def train_weight_sparse(cfg: WeightSparseConfig, data, val=None, model: interp.HookedModel | None = None,
                        progress: bool = True, loss_fn=None) -> tuple[interp.HookedModel, TrainReport]:
    """Train a (weight-sparse) model. `data(step)` gives a batch: (ids, mask) for the default next-token
    loss, or whatever `loss_fn(model, batch) -> loss` takes (e.g. a task's answer loss)."""
    from interp.wrapper.tokens import next_token_loss

    model = model or build_model(cfg)
    hf = model.hf_model
    matrices = [p for p in hf.parameters() if p.ndim == 2]
    others = [p for p in hf.parameters() if p.ndim != 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": cfg.weight_decay}, {"params": others, "weight_decay": 0.0}],
                            lr=cfg.lr, eps=cfg.eps)
    report = TrainReport(config=asdict(cfg))
    t0 = time.perf_counter()
    hf.train()
    bar = logs.progress(range(cfg.steps), desc=f"train l0={cfg.l0:g}", enabled=progress)
    for step in bar:
        for g in opt.param_groups:
            g["lr"] = cfg.lr * lr_factor(step, cfg.steps, cfg.warmup)
        if loss_fn is None:
            ids, mask = data(step)
            loss = next_token_loss(hf(input_ids=ids, attention_mask=mask, use_cache=False).logits, ids, mask)
        else:
            loss = loss_fn(model, data(step))
        opt.zero_grad()
        loss.backward()
        grads = [p.grad for p in hf.parameters() if p.grad is not None]
        rms = torch.sqrt(sum((g.float() ** 2).sum() for g in grads) / sum(g.numel() for g in grads))
        if rms > cfg.grad_rms_clip:
            for g in grads:
                g.mul_(cfg.grad_rms_clip / rms)
        opt.step()
        frac = l0_schedule(step + 1, cfg.steps, cfg.l0, cfg.anneal_start, cfg.anneal_end)
        if frac < 1:
            project_model_(hf, frac, cfg.min_per_neuron)
        report.losses.append(float(loss.detach()))
        if step % 50 == 0:
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}", l0=f"{frac:.3f}")
    hf.eval()
    report.final_loss = sum(report.losses[-50:]) / len(report.losses[-50:])
    if val is not None:
        with torch.no_grad():
            report.val_loss = float(sum(next_token_loss(model(ids), ids, m) for ids, m in val) / len(val))
    sp = sparse_parameters(hf)
    report.nonzero_fraction = sum(int((p != 0).sum()) for _, p in sp) / sum(p.numel() for _, p in sp)
    report.seconds = round(time.perf_counter() - t0, 1)
    return model, report


def reinstall_from_config(hf_model) -> None:
    """Re-apply AbsTopK recorded in a saved model's config (`abstopk_frac`, `abstopk_locations`)."""
    frac = getattr(hf_model.config, "abstopk_frac", None)
    if frac:
        install_abstopk(hf_model, frac, tuple(getattr(hf_model.config, "abstopk_locations", ABSTOPK_LOCATIONS)))
