"""The Bigram-Backcopy task (Guo et al. 2024, "Active-dormant attention heads"): a synthetic language on
which small Transformers grow attention sinks and a massive first-token residual within a few thousand
steps, so the decoupling experiment can see the phenomena without a large natural-text budget.

Every row starts with a BOS token. After an ordinary token the next one follows a fixed random bigram
table (sparse rows, so it is predictable); after one of the few *trigger* tokens the next token copies
the token before the trigger. A head that copies is needed only after triggers: elsewhere it has
nothing to do, and the model learns to park it on BOS (a sink).

    >>> rows = bigram_backcopy(n_rows=1024, ctx_len=64, seed=0)     # [1024, 64] int64, column 0 = BOS
"""

from __future__ import annotations

import torch

BOS = 256
"""BOS id: the byte tokenizer's end-of-text token, so the models keep the 257-token vocabulary."""


def bigram_table(vocab: int = 64, support: int = 4, seed: int = 0) -> torch.Tensor:
    """[vocab, vocab] row-stochastic transition matrix; each row puts its mass on `support` random tokens."""
    g = torch.Generator().manual_seed(seed)
    table = torch.zeros(vocab, vocab)
    for a in range(vocab):
        nxt = torch.randperm(vocab, generator=g)[:support]
        table[a, nxt] = torch.rand(support, generator=g).add_(0.1)
    return table / table.sum(-1, keepdim=True)


def bigram_backcopy(
    n_rows: int,
    ctx_len: int = 64,
    vocab: int = 64,
    n_triggers: int = 3,
    support: int = 4,
    seed: int = 0,
    table_seed: int = 0,
) -> torch.Tensor:
    """[n_rows, ctx_len] token rows: BOS, a uniform first token, then bigram steps with back-copies after
    the trigger tokens (ids 0..n_triggers-1). `table_seed` fixes the language; `seed` the sample."""
    if ctx_len < 3 or vocab <= n_triggers or n_rows < 1:
        raise ValueError(
            f"need ctx_len >= 3, vocab > n_triggers and n_rows >= 1 (got {ctx_len}, {vocab}, {n_triggers}, {n_rows})"
        )
    table = bigram_table(vocab, support, table_seed)
    g = torch.Generator().manual_seed(seed)
    rows = torch.empty(n_rows, ctx_len, dtype=torch.long)
    rows[:, 0] = BOS
    rows[:, 1] = torch.randint(0, vocab, (n_rows,), generator=g)
    for t in range(1, ctx_len - 1):
        cur = rows[:, t]
        nxt = torch.multinomial(table[cur], 1, generator=g).squeeze(1)
        prev = rows[:, t - 1]
        copy = (cur < n_triggers) & (prev != BOS)
        rows[:, t + 1] = torch.where(copy, prev, nxt)
    return rows
