"""What the tutorials' cells share: `Cell`, the imports every notebook starts with, the IOI prompt templates, and a
stand-in for ARENA's IOI dataset module. The cells themselves are in this package's other files.

The four tutorials: TL's Main Demo, Exploratory Analysis Demo and Activation Patching demo (TransformerLens
`demos/`, TL 3.9) and ARENA 1.4.1 (Indirect Object Identification, its solutions' idioms). Every cell runs in one
namespace per tutorial, as in a notebook, where `model` is already defined: that is the one line changed. Left
out: installs, imports (in `IMPORTS`), plotting helpers, markdown, TL's own toy `HookedRootModule` and
checkpoint-label cells (they never touch a model), and NBVAL_SKIP cells whose function another cell already runs.
Plotting cells are reduced to computing what they plot (circuitsvis / plotly calls dropped).

Sized to the tiny test models (2 layers, 4 heads, a byte tokenizer of 257 tokens, context 128): names are single
letters (a byte is a token, so answers carry no leading space), texts are short, random tokens are drawn below
256, and layer / head numbers are ones the model has. `IN_GITHUB = True` as in TL's CI, which seeds the random
cells and skips the slow ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch


@dataclass
class Cell:
    code: str
    gqa: Literal["runs", "raises", "skip"] = "runs"
    """On a grouped-query model (2 kv heads for 4 query heads): a cell that indexes k or v by query head
    "raises" (the error must say why); a cell that needs such a cell's result is "skip"ped."""
    compare: bool = True
    """False where the numbers differ by design: TL samples where we decode greedily (`generate` without
    do_sample), or the cell reads weights of ARENA's `fold_ln=True` model (`W_U`, `OV`: the norms' weights folded
    in; ours are never folded, and `model.tokens_to_residual_directions` folds the final norm's weight in
    itself). The cell must still run."""


IMPORTS = """
import torch
import torch as t
import numpy as np
import einops
from fancy_einsum import einsum
from functools import partial
from jaxtyping import Float
import transformer_lens.utilities as utils
from transformer_lens import FactoredMatrix, ActivationCache
from transformer_lens.hook_points import HookPoint
import transformer_lens.patching as patching
torch.set_grad_enabled(False)
IN_GITHUB = True
device = model.cfg.device
"""

IOI_TEMPLATES = """
prompt_format = [
    "When J and M went out, {} gave it to ",
    "When T and S went off, {} gave it to ",
    "When D and A sat down, {} gave it to ",
    "After R and E ran out, {} gave it to ",
]
"""


class TinyIOI:
    """What ARENA's `IOIDataset` gives the cells, for prompts whose answer is the next token: `toks` [batch, pos]
    (BOS first), `word_idx["end"]` / `word_idx["IO"]` [batch] positions, `io_tokenIDs`, `s_tokenIDs` [batch],
    `sentences`, `groups` (the rows of each template), `max_len`, `len()`."""

    def __init__(self, model, sentences, io_names, s_names):
        self.sentences = list(sentences)
        self.toks = model.to_tokens(self.sentences, prepend_bos=True)
        self.max_len = self.toks.shape[1]
        self.io_tokenIDs = torch.tensor([model.to_single_token(n) for n in io_names])
        self.s_tokenIDs = torch.tensor([model.to_single_token(n) for n in s_names])
        io = torch.stack([(row == tok).nonzero()[0, 0] for row, tok in zip(self.toks, self.io_tokenIDs)])
        self.word_idx = {"end": torch.full((len(self),), self.max_len - 1), "IO": io}
        self.groups = [torch.arange(i, min(i + 2, len(self))) for i in range(0, len(self), 2)]

    def __len__(self) -> int:
        return len(self.sentences)
