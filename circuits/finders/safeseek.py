"""SafeSeek (Yu et al., ICML 2026): safety circuits found by differentiable binary masks, and Safety Circuit Tuning.

Masks (`circuits.finders.masks.UnitMasks`): one logit per attention head (true per-head outputs on
`attn.hook_z`, before the output projection; `head_mode="compat"` reproduces the official code, which
masks d_model/n_heads slices of the projected output), per MLP neuron (`mlp.hook_post`) and optionally
per residual channel; straight-through hard masks m = 1[sigmoid(l) >= 0.5] (hard-concrete optional);
removed units are zeroed. Only the mask logits are trained; the model is frozen.

Objectives (CE is the full-vocabulary cross-entropy of the answer token):

backdoor, dual-mask optimisation over masks G (purified model) and H (backdoor circuit)::

    L = w1 CE(y | x; G) + w2 CE(y | x~; G) + w3 CE(y~ | x~; H) - w4 CE(y~ | x; H)
      + w5 sum_sites mean(1 - sigmoid(l_G)) + w6 sum_sites mean(log(sigmoid(l_H) + 1e-6))
      + w7 * 100 * mean_sites[ sum sigmoid(l_G) sigmoid(l_H) / sum sigmoid(l_G) ]

alignment, one mask m: with m (circuit removed) the model complies, with 1 - m (circuit alone) it refuses::

    L = w_a CE(accept | x; m) + w_r CE(refuse | x; 1 - m) + sum_sites w_s mean(1 - sigmoid(l))

For a task with no trigger (quotes, brackets), the alignment objective is used with accept = the wrong
answer and refuse = the right one: the circuit is what the model needs for the task.

Safety Circuit Tuning (`circuit_tuning`): fine-tune only the circuit's parameters (its rows and columns,
`mode="circuit"`), or everything but them (`mode="complement"`), with gradient masks.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch
from interp.infra import logs

from interp.infra.checks import require_numbers
from circuits.format.edges import circuit_edges
from circuits.format.circuit import Circuit
from circuits.finders.masks import Gate, UnitMasks
from circuits.tasks.binary import Task, TaskBatch, answer_ce
from circuits.model.weights import unit_param_masks


NEURON_CODE_WEIGHTS = (1, 1, 1, 1, 0.1, 3.0, 1.0)
"""w1..w7 of the official `backdoor/neuron.py`."""
HEAD_CODE_WEIGHTS = (1, 1, 0, 0, 0.1, 0, 0)
"""w1..w7 of the official `backdoor/head.py`: only the purified mask G is trained."""


@dataclass
class SafeSeekConfig:
    """Settings of a SafeSeek mask search."""

    objective: Literal["auto", "backdoor", "alignment"] = "auto"
    """"auto": backdoor for tasks with a clean split named backdoor, alignment otherwise."""
    units: tuple[str, ...] = ("head", "neuron")
    """Unit kinds: head, neuron, and optionally resid_pre / resid_mid / resid_post channels."""
    head_mode: Literal["true", "compat"] = "true"
    """"true": per-head outputs before W_O (hook_z); "compat": the official code's slices after W_O."""
    gate: Gate = "ste"
    """ste (straight-through hard mask, the paper's), hard_concrete, or sigmoid (soft, no STE)."""
    init_logit: float = 1.0
    """Initial mask logit (1.0 in the official neuron code, 0.1 in its head code)."""
    lr: float = 1e-2
    """Adam(W) learning rate on the mask logits."""
    steps: int = 300
    """Optimiser steps."""
    batch_size: int = 16
    n_train: int = 100
    """Training prompts per split (the paper uses 100)."""
    n_val: int = 100
    eval_every: int = 25
    """Keep the mask with the best validation functional loss, checked this often."""
    backdoor_weights: tuple[float, ...] = (1, 1, 0, 0, 0.1, 0, 0)
    """w1..w7 of the backdoor objective. Default: the official head-mask code's (only G is trained);
    `NEURON_CODE_WEIGHTS` are the official neuron code's (both masks; did not purify our toy, see README)."""
    alignment_weights: tuple[float, ...] = (2, 2, 0.1, 0.1)
    """w_a, w_r, w_s for attention units, w_s for MLP/residual units (official head+neuron code)."""
    ablation: str = "zero"
    """How removed units are ablated: zero (the paper's) or mean (over the task prompts)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.ablation not in ("zero", "mean"):
            raise ValueError(f"SafeSeek ablates units to zero or mean, got {self.ablation!r}")
        if self.head_mode not in ("true", "compat"):
            raise ValueError(f"head_mode must be 'true' or 'compat', got {self.head_mode!r}")
        if len(self.backdoor_weights) != 7 or len(self.alignment_weights) != 4:
            raise ValueError("backdoor_weights needs 7 values (w1..w7), alignment_weights 4 (w_a, w_r, w_s attn, w_s mlp)")
        require_numbers(self, positive_int=("steps", "batch_size", "n_train", "n_val", "eval_every"), positive=("lr",),
                        finite=("init_logit",))

    @property
    def trains_h(self) -> bool:
        """Whether the backdoor objective uses the H mask at all (the official head code's weights do not)."""
        w = self.backdoor_weights
        return any(w[i] != 0 for i in (2, 3, 5, 6))

    def kinds(self) -> tuple[str, ...]:
        swap = {"head": "head_compat" if self.head_mode == "compat" else "head"}
        return tuple(swap.get(k, k) for k in self.units)


def _forward(model, batch: TaskBatch, masks: UnitMasks, invert: bool = False):
    with model.hooks(fwd_hooks=masks.hooks(invert)):
        return model({"input_ids": batch.ids, "attention_mask": batch.mask})


def backdoor_loss(model, G: UnitMasks, H: UnitMasks | None, clean: TaskBatch, trig: TaskBatch, w) -> tuple[torch.Tensor, torch.Tensor]:
    """(total, bounded functional) DMO loss. `clean`: target y, alt y~; `trig`: target y~, alt y.

    With H None (weights w3, w4, w6, w7 all 0, the official head code) the two H forwards are skipped.
    """
    lg_c, lg_t = _forward(model, clean, G), _forward(model, trig, G)
    if H is None:
        bounded = w[0] * answer_ce(lg_c, clean) + w[1] * answer_ce(lg_t, trig, trig.alt)
        dense_g = sum(1 - v for v in G.sigmoid_mean().values())
        return bounded + w[4] * dense_g, bounded.detach()
    lh_t, lh_c = _forward(model, trig, H), _forward(model, clean, H)
    bounded = w[0] * answer_ce(lg_c, clean) + w[1] * answer_ce(lg_t, trig, trig.alt) + w[2] * answer_ce(lh_t, trig)
    functional = bounded - w[3] * answer_ce(lh_c, clean, clean.alt)
    sg, sh = G.sigmoid_mean(), H.sigmoid_mean()
    dense_g = sum(1 - v for v in sg.values())
    sparse_h = sum(torch.log(torch.sigmoid(H.logits[k]) + 1e-6).mean() for k in sh)
    overlap = torch.stack([
        (torch.sigmoid(G.logits[k]) * torch.sigmoid(H.logits[k])).sum() / torch.sigmoid(G.logits[k]).sum()
        for k in sg
    ]).mean()
    # Checkpoints are selected on the bounded part: the ascent term -w4 CE(y~ | x; H) can fall without limit.
    return functional + w[4] * dense_g + w[5] * sparse_h + w[6] * 100 * overlap, bounded.detach()


def alignment_loss(model, m: UnitMasks, harmful: TaskBatch, w) -> tuple[torch.Tensor, torch.Tensor]:
    """(total, functional) alignment loss. `harmful`: target = refuse answer, alt = accept answer."""
    comply = answer_ce(_forward(model, harmful, m), harmful, harmful.alt)
    refuse = answer_ce(_forward(model, harmful, m, invert=True), harmful)
    functional = w[0] * comply + w[1] * refuse
    sparsity = sum((w[2] if s.kind.startswith("head") else w[3]) * (1 - torch.sigmoid(m.logits[s.key])).mean()
                   for s in m.sites)
    return functional + sparsity, functional.detach()


@dataclass
class SafeSeekResult:
    circuit: Circuit
    masks: dict = field(default_factory=dict)
    """"G"/"H" (backdoor) or "m" (alignment): the trained `UnitMasks`."""
    history: list = field(default_factory=list)


def safeseek(model, task: Task, cfg: SafeSeekConfig | None = None, progress: bool = True) -> SafeSeekResult:
    """Find a task's safety circuit with SafeSeek masks; returns the circuit (the units the mask removes)."""
    cfg = cfg or SafeSeekConfig()
    objective = cfg.objective
    if objective == "auto":
        objective = "backdoor" if task.name == "backdoor" else "alignment"
    if objective == "backdoor" and task.generate_clean is None:
        raise ValueError(f"the backdoor objective needs a task with clean and triggered prompts; {task.name!r} has none")
    tok = model.tokenizer
    torch.manual_seed(cfg.seed)
    for p in model.parameters():
        p.requires_grad_(False)
    warnings = []
    if cfg.steps < 100:
        msg = (f"{cfg.steps} steps is a short run: with lr {cfg.lr} and initial logit {cfg.init_logit} the masks need "
               "~100 steps before any unit switches off, so the circuit is likely empty; use --steps 300")
        warnings.append(msg)
        import warnings as _w

        _w.warn(msg, stacklevel=2)
    trig = task.make(cfg.n_train, cfg.seed, tok).to(model.device)
    means = None
    if cfg.ablation == "mean":
        from circuits.finders.masks import site_means, sites_of

        means = site_means(model, sites_of(model, cfg.kinds()), [(trig.ids, trig.mask)])
    trig_val = task.make(cfg.n_val, cfg.seed + 10_000, tok).to(model.device)
    clean = clean_val = None
    if objective == "backdoor":
        clean = task.make_clean(cfg.n_train, cfg.seed, tok).to(model.device)
        clean_val = task.make_clean(cfg.n_val, cfg.seed + 10_000, tok).to(model.device)
        masks = {"G": UnitMasks(model, cfg.kinds(), init=cfg.init_logit, gate=cfg.gate, means=means)}
        if cfg.trains_h:
            masks["H"] = UnitMasks(model, cfg.kinds(), init=cfg.init_logit, gate=cfg.gate, means=means)
    else:
        masks = {"m": UnitMasks(model, cfg.kinds(), init=cfg.init_logit, gate=cfg.gate, means=means)}
    params = [p for m in masks.values() for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)

    def loss_of(t_batch, c_batch):
        if objective == "backdoor":
            return backdoor_loss(model, masks["G"], masks.get("H"), c_batch, t_batch, cfg.backdoor_weights)
        return alignment_loss(model, masks["m"], t_batch, cfg.alignment_weights)

    def pick(batch: TaskBatch) -> TaskBatch:
        idx = torch.randperm(len(batch), generator=gen)[: cfg.batch_size]
        return TaskBatch([batch.texts[i] for i in idx], *(t[idx.to(t.device)] for t in
                         (batch.ids, batch.mask, batch.pos, batch.target, batch.alt)))

    best, best_state, history = float("inf"), None, []
    t0 = time.perf_counter()
    bar = logs.progress(range(cfg.steps), desc=f"safeseek {objective}", enabled=progress)
    for step in bar:
        for m in masks.values():
            m.train()
        loss, functional = loss_of(pick(trig), pick(clean) if clean is not None else None)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (step + 1) % cfg.eval_every == 0 or step == cfg.steps - 1:
            for m in masks.values():
                m.eval()
            with torch.no_grad():
                _, val = loss_of(trig_val, clean_val)
            history.append({"step": step + 1, "loss": float(loss.detach()), "val_functional": float(val)})
            bar.set_postfix(val=f"{float(val):.3f}")
            if float(val) < best:
                best, best_state = float(val), {k: copy.deepcopy(m.state_dict()) for k, m in masks.items()}
    for k, m in masks.items():
        m.load_state_dict(best_state[k])
        m.eval()
    key = "G" if objective == "backdoor" else "m"
    nodes = sorted(masks[key].removed_nodes())
    edges, n_edges = circuit_edges(model, nodes)
    n_units = masks[key].n_units
    forwards_per_step = 2 if objective == "alignment" else (4 if "H" in masks else 2)
    metrics = {"objective": objective, "n_nodes": len(nodes), "n_edges": n_edges["n_edges"], **n_edges, "n_units": n_units,
               "removed_fraction": len(nodes) / n_units, "val_functional_loss": best,
               "seconds": round(time.perf_counter() - t0, 2), "forwards_per_step": forwards_per_step}
    if not nodes:
        warnings.append("the mask removed no unit: the circuit is empty (train longer, or raise the sparsity weight)")
    if warnings:
        metrics["warnings"] = warnings
    extra = {"node_scores": {s.key: [round(float(v), 5) for v in masks[key].logits[s.key].detach().tolist()]
                             for s in masks[key].sites},
             "node_scores_meaning": "mask logit per unit of each site (kind_layer); a unit is removed when it is < 0"}
    if objective == "backdoor":
        if "H" in masks:
            h_nodes = masks["H"].kept_nodes()
            metrics["h_circuit_nodes"] = len(h_nodes)
            extra["h_circuit"] = [{"layer": n.layer, "kind": n.kind, "index": n.index} for n in h_nodes]
        else:
            metrics["h_circuit_nodes"] = None
            metrics["h_trained"] = False
    circuit = Circuit(nodes, edges, metrics, {"model": model.provenance, "task": task.name, "method": "safeseek",
                                              "ablation": cfg.ablation, "config": asdict(cfg)}, extra)
    return SafeSeekResult(circuit, masks, history)


def circuit_tuning(model, nodes, batches, mode: Literal["circuit", "complement"] = "circuit", steps: int = 200,
                   lr: float = 1e-4, loss_fn=None, progress: bool = True) -> dict:
    """Safety Circuit Tuning: fine-tune only the circuit's parameters (or all but them).

    `batches`: a list of `TaskBatch` cycled through; the loss defaults to the answer cross-entropy.
    Returns the number of trainable entries and the loss history. The model is changed in place.
    """
    if mode not in ("circuit", "complement"):
        raise ValueError(f"mode must be 'circuit' or 'complement', got {mode!r}")
    unit_masks = unit_param_masks(model, nodes)
    params = [p for p in model.parameters()]
    grad_masks = {}
    for p in params:
        m = unit_masks.get(p, torch.zeros_like(p))
        grad_masks[p] = m if mode == "circuit" else 1 - m
    train = [p for p in params if grad_masks[p].any()]
    if not train:
        raise ValueError("nothing to tune: the circuit has no units that own parameters")
    for p in params:
        p.requires_grad_(p in set(train))
    handles = [p.register_hook(lambda g, m=grad_masks[p]: g * m) for p in train]
    opt = torch.optim.Adam(train, lr=lr)
    loss_fn = loss_fn or (lambda logits, b: answer_ce(logits, b))
    history = []
    try:
        model.hf_model.train()
        for step in logs.progress(range(steps), desc=f"circuit tuning ({mode})", enabled=progress):
            b = batches[step % len(batches)].to(model.device)
            loss = loss_fn(model({"input_ids": b.ids, "attention_mask": b.mask}), b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            history.append(float(loss.detach()))
    finally:
        model.hf_model.eval()
        for h in handles:
            h.remove()
        for p in params:
            p.requires_grad_(False)
    trainable = int(sum(grad_masks[p].sum() for p in train))
    return {"trainable_entries": trainable, "total_entries": sum(p.numel() for p in params), "loss": history}
