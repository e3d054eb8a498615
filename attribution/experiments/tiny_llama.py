"""A user's own model for `interp attribute lds --model`: a small random-init Llama saved as a local HF folder.

    python -m attribution.experiments.tiny_llama --out runs/tiny-llama
    interp attribute lds --out runs/lds_llama --model runs/tiny-llama --data pydoc-topics --ctx-len 64 -m 50

The third LDS task (attribution/README.md, "three tasks"): none of the methods were tuned on it. It differs from
the NeoX task in architecture (Llama: RMSNorm, rotary positions, SwiGLU MLP with gate/up/down projections,
grouped-query attention with 4 query and 2 key-value heads, untied unembedding), depth and width (3 layers,
d 96), corpus (the reference manual's topic texts, `pydoc-topics`, English prose rather than docstrings) and
sequence length (64 bytes). The folder holds the seeded weights and the byte tokenizer (257 ids), so it loads
as any local folder does (`interp.load_model("runs/tiny-llama")`) and every retraining run starts from the same
weights. Writing it takes about a second; the same `--seed` writes the same weights.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def tiny_llama_config(ctx: int = 64, d_model: int = 96, layers: int = 3):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=257,
        hidden_size=d_model,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256 * d_model // 96,
        max_position_embeddings=ctx,
        tie_word_embeddings=False,
        bos_token_id=256,
        eos_token_id=256,
        pad_token_id=256,
    )


def write_tiny_llama(out: str | Path, seed: int = 0, ctx: int = 64, d_model: int = 96, layers: int = 3) -> Path:
    """Write the seeded random-init Llama and the byte tokenizer to the folder `out` (created); returns it."""
    import torch
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    from interp.data import byte_tokenizer

    hf_logging.disable_progress_bar()
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty; choose a new folder for the model")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        hf = LlamaForCausalLM(tiny_llama_config(ctx, d_model, layers))
    out.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(out)
    byte_tokenizer().save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="new folder for the model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ctx-len", type=int, default=64, help="longest sequence (max_position_embeddings)")
    a = ap.parse_args(argv)
    out = write_tiny_llama(a.out, a.seed, a.ctx_len)
    import torch
    from transformers import LlamaForCausalLM

    hf = LlamaForCausalLM.from_pretrained(out)
    n_all = sum(p.numel() for p in hf.parameters())
    n_lin = sum(m.weight.numel() for n, m in hf.named_modules() if isinstance(m, torch.nn.Linear) and ".layers." in n)
    print(f"wrote {out}: {n_all:,} parameters, {n_lin:,} in the layers' Linears (what TracIn and EK-FAC score)")
    print(f"next: interp attribute lds --out runs/lds_llama --model {out} --data pydoc-topics --ctx-len {a.ctx_len}")


if __name__ == "__main__":
    main()
