"""SCPO: curriculum + symmetric (response-side and condition-side) preference optimisation against
hallucination, in a toy vision-language setting.

Paper: *Semantic Curriculum Preference Optimization* (code URL in the abstract, github.com/ShawnLee0910/SCPO,
not verified; nothing read from it). Three pieces added to DPO:

1. **Curriculum**: preference pairs ordered easy-to-hard by a difficulty score; here the reference
   model's own margin log π_ref(y_w|v) - log π_ref(y_l|v) (a large margin = easy), with a pacing
   function that opens the hardest pairs gradually (`curriculum_pool`).
2. **Symmetric objective**: the usual response-side DPO term (preferred vs dispreferred response given
   the image) plus a condition-side term: the same preferred response under the original image v vs a
   semantically edited image v' (an attribute it mentions removed), `condition_dpo_loss`.
3. **Dynamic reference**: the reference is reset to the current policy every R steps.

**The reduction, stated:** there are no images or an MLLM here. An "image" is a binary attribute vector,
a response is a short sequence of attribute tokens, and a hallucination is a token naming an attribute
the image does not have (the catalog's toy). The visual-side term acts on that vector, so it is the
paper's term on a symbolic image, not on pixels or a vision encoder.

    pol = AttributePolicy(n_attr=10, length=3)
    hallucination_rate(pol, images, g)          # share of sampled tokens naming absent attributes
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class AttributePolicy(nn.Module):
    """π(y | v): v a binary attribute vector [n_attr], y `length` attribute tokens; an MLP per position on
    (image features, previous-token embedding, position embedding)."""

    def __init__(self, n_attr: int, length: int, d: int = 32, hidden: int = 64):
        super().__init__()
        self.n_attr, self.length = n_attr, length
        self.img = nn.Linear(n_attr, d)
        self.tok = nn.Embedding(n_attr + 1, d)  # id n_attr = start
        self.pos = nn.Embedding(length, d)
        self.mlp = nn.Sequential(nn.Linear(3 * d, hidden), nn.GELU(), nn.Linear(hidden, n_attr))

    def logits(self, v: Tensor, y: Tensor) -> Tensor:
        prev = torch.cat([torch.full_like(y[:, :1], self.n_attr), y[:, :-1]], 1)
        img = self.img(v.float()).unsqueeze(1).expand(-1, self.length, -1)
        pos = self.pos.weight.unsqueeze(0).expand(len(v), -1, -1)
        return self.mlp(torch.cat([img, self.tok(prev), pos], -1))

    def logprob(self, v: Tensor, y: Tensor) -> Tensor:
        lp = torch.log_softmax(self.logits(v, y), -1)
        return lp.gather(2, y.unsqueeze(2)).squeeze(2).sum(1)

    @torch.no_grad()
    def sample(self, v: Tensor, g: torch.Generator) -> Tensor:
        y = torch.zeros(len(v), self.length, dtype=torch.long)
        for t in range(self.length):
            y[:, t] = torch.multinomial(torch.softmax(self.logits(v, y)[:, t], -1), 1, generator=g)[:, 0]
        return y


def sample_images(n: int, n_attr: int, g: torch.Generator) -> Tensor:
    """Attributes come in co-occurring pairs (2i, 2i+1): a pair is active w.p. 0.5, each member then
    present w.p. 0.7; an image left empty gets attribute 0. [n, n_attr] in {0, 1}."""
    if n_attr < 2 or n_attr % 2:
        raise ValueError(f"n_attr={n_attr} must be an even number >= 2 (attributes come in pairs)")
    grp = (torch.rand(n, n_attr // 2, generator=g) < 0.5).repeat_interleave(2, 1)
    v = (grp & (torch.rand(n, n_attr, generator=g) < 0.7)).float()
    v[v.sum(1) == 0, 0] = 1  # an empty image gets attribute 0
    return v


def partner(a: Tensor) -> Tensor:
    """The co-occurring attribute of each attribute id (2i <-> 2i+1)."""
    return a ^ 1


def sample_captions(v: Tensor, length: int, g: torch.Generator, p_halluc: float = 0.0) -> Tensor:
    """Captions of present attributes (uniform, with replacement); each token is swapped for its
    co-occurring partner w.p. `p_halluc` (a hallucination when the partner is absent)."""
    if v.ndim != 2 or (v.sum(1) == 0).any():
        raise ValueError("every image needs at least one present attribute ([n, n_attr] with a 1 per row)")
    y = torch.multinomial(v, length, replacement=True, generator=g)
    swap = torch.rand(y.shape, generator=g) < p_halluc
    return torch.where(swap, partner(y), y)


def hallucinated_pairs(v: Tensor, y_w: Tensor, g: torch.Generator, hard: Tensor) -> Tensor:
    """y_l: y_w with one random position replaced by an absent attribute; the partner of the replaced token
    when `hard` (and it is absent), else a uniformly random absent attribute."""
    n, length = y_w.shape
    y_l = y_w.clone()
    pos = torch.randint(0, length, (n,), generator=g)
    orig = y_w[torch.arange(n), pos]
    absent = 1 - v
    rand_abs = torch.multinomial(absent + 1e-9 * (absent.sum(1, keepdim=True) == 0), 1, generator=g)[:, 0]
    par = partner(orig)
    use_par = hard & (v[torch.arange(n), par] == 0)
    y_l[torch.arange(n), pos] = torch.where(use_par, par, rand_abs)
    return y_l


def edit_images(v: Tensor, y_w: Tensor, g: torch.Generator) -> Tensor:
    """v': v with one attribute mentioned in y_w removed (the semantically edited image of the visual term)."""
    n, length = y_w.shape
    pick = y_w[torch.arange(n), torch.randint(0, length, (n,), generator=g)]
    v2 = v.clone()
    v2[torch.arange(n), pick] = 0
    return v2


def condition_dpo_loss(logp_v: Tensor, logp_edit: Tensor, ref_v: Tensor, ref_edit: Tensor, beta: float) -> Tensor:
    """Condition-side DPO: the same response should be likelier under the real image than the edited one."""
    if beta <= 0:
        raise ValueError(f"beta={beta} must be positive")
    margin = (logp_v - ref_v.detach()) - (logp_edit - ref_edit.detach())
    return -F.logsigmoid(beta * margin).mean()


def curriculum_pool(difficulty: Tensor, step: int, steps: int, start: float = 0.3) -> Tensor:
    """Indices of the pairs open at `step`: the easiest fraction min(1, start + (1 - start) step / (0.7 steps))
    by `difficulty` (higher = harder). A linear pacing function (ours; the paper's schedule is not public)."""
    if not 0 < start <= 1 or steps < 1:
        raise ValueError(f"need 0 < start <= 1 and steps >= 1; got {start}, {steps}")
    frac = min(1.0, start + (1 - start) * step / (0.7 * steps))
    order = torch.argsort(difficulty)
    return order[: max(1, int(frac * len(order)))]


@torch.no_grad()
def hallucination_rate(pol: AttributePolicy, v: Tensor, g: torch.Generator) -> tuple[float, float]:
    """(share of sampled tokens naming an absent attribute, mean share of present attributes mentioned)."""
    y = pol.sample(v, g)
    present = v.gather(1, y)
    halluc = float((present == 0).float().mean())
    mentioned = torch.zeros_like(v).scatter(1, y, 1.0) * v
    coverage = float((mentioned.sum(1) / v.sum(1)).mean())
    return halluc, coverage
