"""Pythia-shaped GPTNeoX models, built from the published Pythia configurations (no hub access).

`pythia-70m-init` is randomly initialised (seeded); `pythia-70m` takes trained weights from a local folder.
"""

from __future__ import annotations

# size -> (hidden_size, num_hidden_layers, num_attention_heads), from the Pythia suite's configs.
PYTHIA_SIZES: dict[str, tuple[int, int, int]] = {
    "14m": (128, 6, 4),
    "31m": (256, 6, 8),
    "70m": (512, 6, 8),
    "160m": (768, 12, 12),
    "410m": (1024, 24, 16),
    "1b": (2048, 16, 8),
    "1.4b": (2048, 24, 16),
    "2.8b": (2560, 32, 32),
    "6.9b": (4096, 32, 32),
    "12b": (5120, 36, 40),
}


def n_params(size: str, vocab: int = 50304) -> int:
    """Parameters of pythia-SIZE (`vocab`: 257 for the byte-tokenizer -init models): per layer 12 d² (attention
    4 d², MLP 8 d²) plus biases and norms, and untied input and output embeddings."""
    d, n_layers, _ = PYTHIA_SIZES[size]
    return n_layers * (12 * d * d + 13 * d) + 2 * vocab * d + 2 * d


def pythia_config(size: str, **overrides):
    """A `GPTNeoXConfig` with Pythia's shape and hyper-parameters (rotary on 25% of dims, parallel residual)."""
    from transformers import GPTNeoXConfig

    if size not in PYTHIA_SIZES:
        raise ValueError(f"unknown Pythia size {size!r}; known: {', '.join(PYTHIA_SIZES)}")
    d, n_layers, n_heads = PYTHIA_SIZES[size]
    kw = dict(
        vocab_size=50304,
        hidden_size=d,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=4 * d,
        hidden_act="gelu",
        max_position_embeddings=2048,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        use_parallel_residual=True,
        layer_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        architectures=["GPTNeoXForCausalLM"],
    )
    kw.update(overrides)
    return GPTNeoXConfig(**kw)


def random_pythia(size: str, seed: int = 0, **overrides):
    """A randomly initialised Pythia-shaped `GPTNeoXForCausalLM` (seeded, so it is the same everywhere)."""
    import torch
    from transformers import GPTNeoXForCausalLM

    config = pythia_config(size, **overrides)
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPTNeoXForCausalLM(config)
