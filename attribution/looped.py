"""A small looped GPT: one shared transformer block applied `num_loops` times, as a HF causal LM.

    read-in   h_0 = wte(x) + wpe(pos)                        (Embedding, Embedding)
    body      h_t = Block(h_{t-1} + [inject] h_0; w_body)    t = 1..tau, the *same* weights every step
    read-out  logits = lm_head(ln_f(h_tau))

Why one module per step: hooks are installed on modules, and a hook on the shared block would fire at
every step. So `transformer.steps` is a `ModuleList` of `LoopStep`s, each with its *own* thin proxy
modules (`attn.q_proj`, `mlp.fc_in`, `ln_1`, ...) that compute with the parameters of the one shared
block `transformer.block` (the tied weights SDI decomposes). The proxies hold no parameters, so the
state dict has one copy of the body; per-step hooks (`blocks.{t}.attn.hook_q`, ...) are distinct, and
`HookedModel` sees the loop steps as its layers (`n_layers == num_loops`).

`LoopedGPTConfig` / `LoopedGPTForCausalLM` are a real `transformers` config/model pair (model_type
"looped_gpt", registered with the Auto classes), so `save_pretrained` / `from_pretrained` and
`interp.load_model(folder)` work. Importing `attribution` registers the hook adapter and the model
spec `looped-gpt` (random init, seeded; `looped-gpt:PATH[@N]` loads trained weights).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.generation import GenerationMixin
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

MODEL_TYPE = "looped_gpt"  # = attribution.looped_spec.MODEL_TYPE (that module must not import this one)


class LoopedGPTConfig(PretrainedConfig):
    """Shape of a looped GPT. `num_hidden_layers` is the loop count tau (what hook layers index)."""

    model_type = MODEL_TYPE

    def __init__(
        self,
        vocab_size: int = 257,
        hidden_size: int = 64,
        num_attention_heads: int = 4,
        num_hidden_layers: int = 4,
        intermediate_size: int = 256,
        max_position_embeddings: int = 128,
        layer_norm_eps: float = 1e-5,
        input_injection: bool = True,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.num_hidden_layers = num_hidden_layers
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.input_injection = input_injection
        self.initializer_range = initializer_range
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_attention_heads {num_attention_heads}")

    @property
    def num_loops(self) -> int:
        return self.num_hidden_layers


# ---------------------------------------------------------------------------------------- the shared block
class SharedBlock(nn.Module):
    """The parameters of the recurrent body (pre-LN attention + GELU MLP). It is never called directly."""

    def __init__(self, c: LoopedGPTConfig):
        super().__init__()
        d = c.hidden_size
        self.ln_1 = nn.LayerNorm(d, eps=c.layer_norm_eps)
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.o_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=c.layer_norm_eps)
        self.fc_in = nn.Linear(d, c.intermediate_size)
        self.fc_out = nn.Linear(c.intermediate_size, d)


class _Proxy(nn.Module):
    """A per-step module that computes with a shared module's parameters (held outside the module tree)."""

    def __init__(self, target: nn.Module):
        super().__init__()
        object.__setattr__(self, "target", target)  # not a submodule: no duplicate parameters

    def extra_repr(self) -> str:
        return f"shares {type(self.target).__name__}"


class StepLinear(_Proxy):
    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.target.weight, self.target.bias)


class StepLayerNorm(_Proxy):
    def forward(self, x: Tensor) -> Tensor:
        t = self.target
        return F.layer_norm(x, t.normalized_shape, t.weight, t.bias, t.eps)


def eager_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Plain softmax attention. q/k/v: [batch, head, pos, d_head]; returns ([batch, pos, head, d_head], pattern)."""
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    pattern = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    pattern = F.dropout(pattern, p=dropout, training=module.training)
    out = torch.matmul(pattern, value).transpose(1, 2).contiguous()
    return out, pattern


class StepAttention(nn.Module):
    def __init__(self, block: SharedBlock, c: LoopedGPTConfig):
        super().__init__()
        self.config = c
        self.n_heads = c.num_attention_heads
        self.d_head = c.hidden_size // c.num_attention_heads
        self.num_key_value_groups = 1
        self.q_proj, self.k_proj = StepLinear(block.q_proj), StepLinear(block.k_proj)
        self.v_proj, self.o_proj = StepLinear(block.v_proj), StepLinear(block.o_proj)

    def forward(self, x: Tensor, attention_mask: Tensor | None) -> Tensor:
        b, n, _ = x.shape

        def heads(t: Tensor) -> Tensor:
            return t.view(b, n, self.n_heads, self.d_head).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        impl = self.config._attn_implementation
        fn = eager_attention_forward if impl in (None, "eager") else ALL_ATTENTION_FUNCTIONS[impl]
        out, _ = fn(self, q, k, v, attention_mask, scaling=self.d_head**-0.5, dropout=0.0)
        return self.o_proj(out.reshape(b, n, -1))


class StepMLP(nn.Module):
    def __init__(self, block: SharedBlock):
        super().__init__()
        self.fc_in, self.fc_out = StepLinear(block.fc_in), StepLinear(block.fc_out)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))


class LoopStep(nn.Module):
    """Use number t of the shared block; its sub-modules are proxies, so its hooks are its own."""

    def __init__(self, block: SharedBlock, c: LoopedGPTConfig, step: int):
        super().__init__()
        self.step = step
        self.ln_1, self.ln_2 = StepLayerNorm(block.ln_1), StepLayerNorm(block.ln_2)
        self.attn = StepAttention(block, c)
        self.mlp = StepMLP(block)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        h = hidden_states + self.attn(self.ln_1(hidden_states), attention_mask)
        return h + self.mlp(self.ln_2(h))


# ---------------------------------------------------------------------------------------- the HF model
class LoopedGPTPreTrainedModel(PreTrainedModel):
    config_class = LoopedGPTConfig
    base_model_prefix = "transformer"
    _supports_attention_backend = True

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)


class LoopedGPTModel(LoopedGPTPreTrainedModel):
    def __init__(self, config: LoopedGPTConfig):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.wpe = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.block = SharedBlock(config)
        self.steps = nn.ModuleList(LoopStep(self.block, config, t) for t in range(config.num_hidden_layers))
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_init()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        b, n = input_ids.shape
        if n > self.config.max_position_embeddings:
            raise ValueError(f"{n} tokens exceed max_position_embeddings {self.config.max_position_embeddings}")
        pos = torch.arange(n, device=input_ids.device)
        h0 = self.wte(input_ids) + self.wpe(pos)[None]
        mask = _additive_mask(attention_mask, b, n, h0.dtype, h0.device)
        h = h0
        for step in self.steps:
            h = step(h + h0 if self.config.input_injection and step.step > 0 else h, mask)
        return self.ln_f(h)


def _additive_mask(attention_mask: Tensor | None, b: int, n: int, dtype, device) -> Tensor:
    """Causal (and padding) mask as [batch, 1, query, key] with 0 where allowed and a large negative elsewhere."""
    allowed = torch.ones(n, n, dtype=torch.bool, device=device).tril()[None, None].expand(b, 1, n, n)
    if attention_mask is not None:
        allowed = allowed & attention_mask.bool()[:, None, None, :]
    # a fully masked query row (left padding) would be NaN; let it see itself
    allowed = allowed | torch.eye(n, dtype=torch.bool, device=device)[None, None]
    return torch.zeros(b, 1, n, n, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)


class LoopedGPTForCausalLM(LoopedGPTPreTrainedModel, GenerationMixin):
    """Looped GPT with a language-model head (untied). Returns `CausalLMOutputWithPast(logits=...)`."""

    def __init__(self, config: LoopedGPTConfig):
        super().__init__(config)
        self.transformer = LoopedGPTModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        logits = self.lm_head(self.transformer(input_ids, attention_mask))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    def body_parameters(self) -> dict[str, nn.Parameter]:
        """The tied (shared-block) parameters, by name: what SDI decomposes over steps."""
        return {f"transformer.block.{n}": p for n, p in self.transformer.block.named_parameters()}

    def step_modules(self) -> dict[str, list[nn.Module]]:
        """Shared-block module name -> its per-step proxy modules, in loop order."""
        names = {
            "q_proj": "attn.q_proj",
            "k_proj": "attn.k_proj",
            "v_proj": "attn.v_proj",
            "o_proj": "attn.o_proj",
            "fc_in": "mlp.fc_in",
            "fc_out": "mlp.fc_out",
            "ln_1": "ln_1",
            "ln_2": "ln_2",
        }
        return {
            f"transformer.block.{k}": [s.get_submodule(v) for s in self.transformer.steps] for k, v in names.items()
        }


def random_looped_gpt(seed: int = 0, **overrides) -> LoopedGPTForCausalLM:
    """A randomly initialised looped GPT (seeded, so it is the same everywhere)."""
    config = LoopedGPTConfig(**overrides)
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LoopedGPTForCausalLM(config)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _register_auto() -> None:
    try:
        AutoConfig.register(MODEL_TYPE, LoopedGPTConfig)
        AutoModelForCausalLM.register(LoopedGPTConfig, LoopedGPTForCausalLM)
    except ValueError:  # already registered (module reloaded)
        pass


_register_auto()


# ---------------------------------------------------------------------------------------- hooks and spec
def load_spec(arg: str | None, dtype: torch.dtype):
    """`looped-gpt` (random init, seed 0, byte tokenizer) or `looped-gpt:PATH[@N]` (a saved folder / run step)."""
    from interp.data import byte_tokenizer
    from interp.models.registry import split_step, state_sha256

    if arg:
        from interp.models.local import load_local

        path, step = split_step(arg)
        model, tok, prov = load_local(path, step, dtype)
        if model.config.model_type != MODEL_TYPE:
            raise ValueError(f"{path} holds a {model.config.model_type!r} model, not a looped GPT")
        return model, tok, prov
    model = random_looped_gpt().to(dtype)
    prov = {
        "source": "built from config (attribution.looped)",
        "weights": "random init, seed 0",
        "weights_sha256": state_sha256(model),
        "tokenizer": "interp/byte-level",
    }
    return model, byte_tokenizer(), prov
