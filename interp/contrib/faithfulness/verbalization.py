"""VerbCheck: controls for activation verbalizers, and the privileged-information score.

Paper: *Do Activation Verbalization Methods Convey Privileged Information?* (arXiv 2509.13316; Li et al.;
official code millicentli/verb_faithfulness). A verbalizer (LIT, Patchscopes, SelfIE) answers questions
about a *target* model's activations by patching them, through an adapter, into a second LLM. The paper
asks whether the answers carry the target's knowledge or only (a) the input, (b) the verbalizer's own
knowledge, and proposes three controls:

1. **zero-shot**: the verbalizer answers from the input text itself, with no activations;
2. **inversion**: an inverter reconstructs the input from the activations and the verbalizer answers from
   that reconstruction (if this matches, the benchmark only tests input information);
3. **knowledge conflict**: the target knows facts the verbalizer does not (or contradicts); does the
   verbalized answer follow the target's facts or the verbalizer's?

Pieces here, over `HookedModel`s and `ActivationCache`s:

- `embed_patch_hook(positions, vectors)`: a `hook_embed` hook that writes vectors into the verbalizer's
  input-embedding slots (the LIT/SelfIE placeholder), used as
  `with verbalizer.hooks(fwd_hooks=[("hook_embed", embed_patch_hook(pos, vecs))]): ...`;
- `fit_linear_map` (ridge least squares; the adapter), `LinearInverter` (activations -> input tokens);
- `choose_answer`: the verbalizer's pick among candidate answer tokens, with optional patching;
- `follow_rates` and `privileged_information_score` = accuracy with activations - the best control.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from interp.contrib.common.ridge import ridge as ridge_weights


def embed_patch_hook(positions: Tensor, vectors: Tensor):
    """A hook for `hook_embed` [batch, pos, d] writing `vectors[b]` at `positions[b]`.

    positions: [batch] (one slot per sequence) or [batch, n_slots]; vectors: [batch, d] or [batch, n_slots, d].
    """
    positions = torch.as_tensor(positions)
    if positions.ndim == 1:
        positions = positions[:, None]
    if vectors.ndim == 2:
        vectors = vectors[:, None]
    if vectors.shape[:2] != positions.shape:
        raise ValueError(
            f"vectors {tuple(vectors.shape)} do not match positions {tuple(positions.shape)}: "
            "need one d-vector per (sequence, slot)"
        )

    def hook(emb: Tensor, point) -> Tensor:
        if emb.shape[0] != positions.shape[0]:
            raise ValueError(f"the patch holds {positions.shape[0]} sequences but the batch has {emb.shape[0]}")
        if vectors.shape[-1] != emb.shape[-1]:
            raise ValueError(
                f"patch vectors have width {vectors.shape[-1]}, the embedding {emb.shape[-1]}; "
                "map them with an adapter first (fit_linear_map)"
            )
        out = emb.clone()
        rows = torch.arange(emb.shape[0])[:, None].expand_as(positions)
        out[rows, positions.to(emb.device)] = vectors.to(emb.device, emb.dtype)
        return out

    return hook


def fit_linear_map(x: Tensor, y: Tensor, ridge: float = 1e-3) -> tuple[Tensor, Tensor]:
    """Ridge least squares y ≈ x W + b: returns (W [d_in, d_out], b [d_out]). The LIT-style adapter.

    x: [n, d_in], y: [n, d_out]. ridge is relative to the mean diagonal of the centred Gram matrix.
    """
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x [n, d_in] and y [n, d_out] need the same n; got {tuple(x.shape)}, {tuple(y.shape)}")
    if x.shape[0] < 2:
        raise ValueError("fit_linear_map needs at least two examples")
    x, y = x.double(), y.double()
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    lam = ridge * float((xc.T @ xc).diagonal().mean().clamp_min(1e-12))
    w = ridge_weights(xc, yc, lam)
    return w.float(), (my - mx @ w).float()


@dataclass
class LinearInverter:
    """The inversion control: a ridge map from activations to a one-hot input token, argmax decoded."""

    w: Tensor
    b: Tensor
    vocab: Tensor  # [n_classes] token ids the inverter can output

    @classmethod
    def fit(cls, acts: Tensor, token_ids: Tensor, ridge: float = 1e-3) -> LinearInverter:
        vocab, idx = torch.unique(torch.as_tensor(token_ids), return_inverse=True)
        onehot = torch.nn.functional.one_hot(idx, len(vocab)).float()
        w, b = fit_linear_map(acts, onehot, ridge)
        return cls(w, b, vocab)

    def invert(self, acts: Tensor) -> Tensor:
        """Reconstructed input token ids [n]."""
        return self.vocab[(acts.float() @ self.w + self.b).argmax(-1)]


@torch.no_grad()
def choose_answer(
    verbalizer, prompts: Tensor, candidates: Sequence[int], patch: tuple[Tensor, Tensor] | None = None
) -> Tensor:
    """The verbalizer's answer among candidate tokens, read at each prompt's last position: [batch] token ids.

    verbalizer: a `HookedModel`. prompts: [batch, pos] token ids (same length). patch: (positions,
    vectors) written into `hook_embed` (see `embed_patch_hook`); None = the zero-shot reading.
    """
    cand = torch.as_tensor(list(candidates))
    if cand.numel() == 0:
        raise ValueError("choose_answer needs at least one candidate answer token")
    hooks = [] if patch is None else [("hook_embed", embed_patch_hook(*patch))]
    logits = verbalizer.run_with_hooks(prompts, fwd_hooks=hooks)[:, -1]
    return cand[logits[:, cand.to(logits.device)].argmax(-1).cpu()]


def follow_rates(answers: Tensor, target_facts: Tensor, verbalizer_facts: Tensor) -> dict[str, float]:
    """Knowledge-conflict control: how often the verbalized answer matches the target's fact, the verbalizer's,
    neither."""
    answers, t, v = map(torch.as_tensor, (answers, target_facts, verbalizer_facts))
    if not (answers.shape == t.shape == v.shape):
        raise ValueError("answers, target_facts and verbalizer_facts must have the same shape (one per question)")
    if answers.numel() == 0:
        raise ValueError("follow_rates needs at least one question")
    ft, fv = (answers == t).float(), (answers == v).float()
    return {
        "follows_target": float(ft.mean()),
        "follows_verbalizer": float(fv.mean()),
        "neither": float(((1 - ft) * (1 - fv)).mean()),
    }


def privileged_information_score(acc_with_activations: float, *control_accs: float) -> float:
    """Accuracy of the activation verbalizer minus the best control's (zero-shot, inversion, ...).

    About 0 means the activations added nothing a control did not already have; > 0 is privileged information.
    """
    if not control_accs:
        raise ValueError("pass at least one control accuracy (e.g. the zero-shot verbalizer's)")
    for a in (acc_with_activations, *control_accs):
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"accuracies lie in [0, 1]; got {a}")
    return acc_with_activations - max(control_accs)
