"""TransformerLens's Main Demo (`demos/Main_Demo.ipynb`): the cells that touch the model."""

from tests.interp.tutorials.cells import Cell

MAIN_DEMO = [
    Cell("""
model_description_text = "## Loading and Running Models. TransformerLens supports many models; let's find the loss!"
loss = model(model_description_text, return_type="loss")
"""),
    Cell("""
gpt2_text = "Natural language processing tasks are typically approached with supervised learning."
gpt2_tokens = model.to_tokens(gpt2_text)
gpt2_logits, gpt2_cache = model.run_with_cache(gpt2_tokens, remove_batch_dim=True)
attention_pattern = gpt2_cache["pattern", 0, "attn"]
gpt2_str_tokens = model.to_str_tokens(gpt2_text)
"""),
    Cell("""
attn_hook_name = "blocks.0.attn.hook_pattern"
attn_layer = 0
_, gpt2_attn_cache = model.run_with_cache(
    gpt2_tokens, remove_batch_dim=True, stop_at_layer=attn_layer + 1, names_filter=[attn_hook_name]
)
gpt2_attn = gpt2_attn_cache[attn_hook_name]
assert torch.allclose(gpt2_attn, attention_pattern)
"""),
    Cell("""
layer_to_ablate = 0
head_index_to_ablate = 1

def head_ablation_hook(
    value: Float[torch.Tensor, "batch pos head_index d_head"], hook: HookPoint
) -> Float[torch.Tensor, "batch pos head_index d_head"]:
    print(f"Shape of the value tensor: {value.shape}")
    value[:, :, head_index_to_ablate, :] = 0.0
    return value

original_loss = model(gpt2_tokens, return_type="loss")
ablated_loss = model.run_with_hooks(
    gpt2_tokens,
    return_type="loss",
    fwd_hooks=[(utils.get_act_name("v", layer_to_ablate), head_ablation_hook)],
)
"""),
    Cell("""
clean_prompt = "After J and M went to the store, M gave a bottle of milk to "
corrupted_prompt = "After J and M went to the store, J gave a bottle of milk to "

clean_tokens = model.to_tokens(clean_prompt)
corrupted_tokens = model.to_tokens(corrupted_prompt)

def logits_to_logit_diff(logits, correct_answer="J", incorrect_answer="M"):
    correct_index = model.to_single_token(correct_answer)
    incorrect_index = model.to_single_token(incorrect_answer)
    return logits[0, -1, correct_index] - logits[0, -1, incorrect_index]

clean_logits, clean_cache = model.run_with_cache(clean_tokens)
clean_logit_diff = logits_to_logit_diff(clean_logits)
corrupted_logits = model(corrupted_tokens)
corrupted_logit_diff = logits_to_logit_diff(corrupted_logits)
"""),
    Cell("""
def residual_stream_patching_hook(
    resid_pre: Float[torch.Tensor, "batch pos d_model"], hook: HookPoint, position: int
) -> Float[torch.Tensor, "batch pos d_model"]:
    clean_resid_pre = clean_cache[hook.name]
    resid_pre[:, position, :] = clean_resid_pre[:, position, :]
    return resid_pre

num_positions = len(clean_tokens[0])
ioi_patching_result = torch.zeros((model.cfg.n_layers, num_positions), device=model.cfg.device)

for layer in range(model.cfg.n_layers):
    for position in range(num_positions):
        temp_hook_fn = partial(residual_stream_patching_hook, position=position)
        patched_logits = model.run_with_hooks(
            corrupted_tokens, fwd_hooks=[(utils.get_act_name("in", layer), temp_hook_fn)]
        )
        patched_logit_diff = logits_to_logit_diff(patched_logits).detach()
        ioi_patching_result[layer, position] = (patched_logit_diff - corrupted_logit_diff) / (
            clean_logit_diff - corrupted_logit_diff
        )
token_labels = [f"{token}_{index}" for index, token in enumerate(model.to_str_tokens(clean_tokens))]
"""),
    Cell("""
batch_size = 10
seq_len = 50
size = (batch_size, seq_len)
input_tensor = torch.randint(0, 256, size)

random_tokens = input_tensor.to(model.cfg.device)
repeated_tokens = einops.repeat(random_tokens, "batch seq_len -> batch (2 seq_len)")
repeated_logits = model(repeated_tokens)
correct_log_probs = model.loss_fn(repeated_logits, repeated_tokens, per_token=True)
loss_by_position = einops.reduce(correct_log_probs, "batch position -> position", "mean")
"""),
    Cell("""
induction_score_store = torch.zeros((model.cfg.n_layers, model.cfg.n_heads), device=model.cfg.device)

def induction_score_hook(pattern: Float[torch.Tensor, "batch head_index dest_pos source_pos"], hook: HookPoint):
    induction_stripe = pattern.diagonal(dim1=-2, dim2=-1, offset=1 - seq_len)
    induction_score = einops.reduce(induction_stripe, "batch head_index position -> head_index", "mean")
    induction_score_store[hook.layer(), :] = induction_score

pattern_hook_names_filter = lambda name: name.endswith("pattern")

model.run_with_hooks(
    repeated_tokens,
    return_type=None,
    fwd_hooks=[(pattern_hook_names_filter, induction_score_hook)],
)
"""),
    Cell("""
if IN_GITHUB:
    torch.manual_seed(50)

induction_head_layer = 1
induction_head_index = 2
size = (1, 20)
input_tensor = torch.randint(0, 256, size)

single_random_sequence = input_tensor.to(model.cfg.device)
repeated_random_sequence = einops.repeat(single_random_sequence, "batch seq_len -> batch (2 seq_len)")
shown = []

def visualize_pattern_hook(pattern: Float[torch.Tensor, "batch head_index dest_pos source_pos"], hook: HookPoint):
    shown.append((model.to_str_tokens(repeated_random_sequence), pattern[0, induction_head_index, :, :]))

model.run_with_hooks(
    repeated_random_sequence,
    return_type=None,
    fwd_hooks=[(utils.get_act_name("pattern", induction_head_layer), visualize_pattern_hook)],
)
"""),
    Cell("""
block_0_params = [(name, param.shape) for name, param in model.tl_named_parameters() if name.startswith("blocks.0.")]
other_params = [(name, param.shape) for name, param in model.tl_named_parameters() if not name.startswith("blocks")]
"""),
    Cell("""
test_prompt = "The quick brown fox jumped over the lazy dog"
num_tokens = len(model.to_tokens(test_prompt)[0])
seen_hooks = {}

def print_name_shape_hook_function(activation, hook):
    seen_hooks[hook.name] = activation.shape

not_in_late_block_filter = lambda name: name.startswith("blocks.0.") or not name.startswith("blocks")

model.run_with_hooks(
    test_prompt,
    return_type=None,
    fwd_hooks=[(not_in_late_block_filter, print_name_shape_hook_function)],
)
"""),
    Cell("""
unembed_bias = model.unembed.b_U
bias_values, bias_indices = unembed_bias.sort(descending=True)
top_k = 20
top_strings = [repr(model.to_string(bias_indices[i])) for i in range(top_k)]
john_bias = model.unembed.b_U[model.to_single_token("J")]
mary_bias = model.unembed.b_U[model.to_single_token("M")]
"""),
    Cell("""
example_text = "The first thing you need to figure out is *how* things are tokenized."
example_text_str_tokens = model.to_str_tokens(example_text)
example_text_tokens = model.to_tokens(example_text)
example_multi_text = ["The cat sat on the mat.", "The cat sat on the mat really hard."]
example_multi_text_tokens = model.to_tokens(example_multi_text)
"""),
    Cell("""
cat_text = "The cat sat on the mat."
cat_logits = model(cat_text)
cat_probs = cat_logits.softmax(dim=-1)
capital_the_token_index = model.to_single_token("T")
the_prob = cat_probs[0, -1, capital_the_token_index].item()
token_256 = model.to_string(256)
detokenized = model.to_string(example_text_tokens.squeeze())
"""),
    Cell("""
positions = [
    model.get_token_position("c", "The cat sat on the mat"),
    model.get_token_position("c", "The cat sat on the mat", prepend_bos=False),
    model.get_token_position("c", "The cat sat on the mat. The mat sat on the cat.", mode="first"),
    model.get_token_position("c", "The cat sat on the mat. The mat sat on the cat.", mode="last"),
]
arithmetic = model.to_str_tokens("2342+2017=21445")
"""),
    Cell("""
shapes = [
    model("Hello World").shape,
    model("Hello World", prepend_bos=True).shape,
    model("Hello World", prepend_bos=False).shape,
]
ioi_logits_with_bos = model("C and M went to the shops, then M gave a bottle of milk to ", prepend_bos=True)
mary_logit_with_bos = ioi_logits_with_bos[0, -1, model.to_single_token("M")].item()
claire_logit_with_bos = ioi_logits_with_bos[0, -1, model.to_single_token("C")].item()
ioi_logits_without_bos = model("C and M went to the shops, then M gave a bottle of milk to ", prepend_bos=False)
mary_logit_without_bos = ioi_logits_without_bos[0, -1, model.to_single_token("M")].item()
claire_logit_without_bos = ioi_logits_without_bos[0, -1, model.to_single_token("C")].item()
claire_pieces = model.to_str_tokens(" Claire", prepend_bos=False)
"""),
    Cell("""
if IN_GITHUB:
    torch.manual_seed(50)
A = torch.randn(5, 2)
B = torch.randn(2, 5)
AB = A @ B
AB_factor = FactoredMatrix(A, B)
norms = (AB.norm(), AB_factor.norm())
dims = (AB_factor.rdim, AB_factor.ldim, AB_factor.mdim)
svals = (torch.linalg.svd(AB).S, AB_factor.S)
C = torch.randn(5, 300)
ABC = AB @ C
ABC_factor = AB_factor @ C
AB_unfactored = AB_factor.AB
assert torch.isclose(AB_unfactored, AB).all()
"""),
    Cell("""
OV_circuit_all_heads = model.OV
OV_circuit_all_heads_eigenvalues = OV_circuit_all_heads.eigenvalues
OV_copying_score = OV_circuit_all_heads_eigenvalues.sum(
    dim=-1
).real / OV_circuit_all_heads_eigenvalues.abs().sum(dim=-1)
"""),
    Cell("""
full_OV_circuit = model.embed.W_E @ OV_circuit_all_heads @ model.unembed.W_U
full_OV_circuit_eigenvalues = full_OV_circuit.eigenvalues
full_OV_copying_score = full_OV_circuit_eigenvalues.sum(dim=-1).real / full_OV_circuit_eigenvalues.abs().sum(dim=-1)
"""),
    Cell(
        """
generated = model.generate("(CNN) President caught in new scandal\\n", max_new_tokens=10, temperature=0.7)
assert isinstance(generated, str) and generated.startswith("(CNN)")
""",
        compare=False,
    ),
]
