"""TransformerLens's Exploratory Analysis Demo (`demos/Exploratory_Analysis_Demo.ipynb`): the IOI walk-through."""

from tests.interp.tutorials.cells import IOI_TEMPLATES, Cell

EXPLORATORY = [
    Cell("model.set_use_attn_result(True)"),
    Cell("""
example_prompt = "After J and M went to the store, J gave a bottle of milk to "
example_answer = "M"
utils.test_prompt(example_prompt, example_answer, model, prepend_bos=True, prepend_space_to_answer=False)
"""),
    Cell(
        IOI_TEMPLATES
        + """
names = [("M", "J"), ("T", "S"), ("D", "A"), ("R", "E")]
prompts = []
answers = []
answer_tokens = []
for i in range(len(prompt_format)):
    for j in range(2):
        answers.append((names[i][j], names[i][1 - j]))
        answer_tokens.append((model.to_single_token(answers[-1][0]), model.to_single_token(answers[-1][1])))
        prompts.append(prompt_format[i].format(answers[-1][1]))
answer_tokens = torch.tensor(answer_tokens).to(device)
prompt_lengths = [len(model.to_str_tokens(prompt)) for prompt in prompts]
"""
    ),
    Cell("""
tokens = model.to_tokens(prompts, prepend_bos=True)
original_logits, cache = model.run_with_cache(tokens)

def logits_to_ave_logit_diff(logits, answer_tokens, per_prompt=False):
    final_logits = logits[:, -1, :]
    answer_logits = final_logits.gather(dim=-1, index=answer_tokens)
    answer_logit_diff = answer_logits[:, 0] - answer_logits[:, 1]
    if per_prompt:
        return answer_logit_diff
    else:
        return answer_logit_diff.mean()

per_prompt = logits_to_ave_logit_diff(original_logits, answer_tokens, per_prompt=True).detach().cpu().round(decimals=3)
original_average_logit_diff = logits_to_ave_logit_diff(original_logits, answer_tokens)
"""),
    Cell("""
W_U = model.unembed.W_U
answer_residual_directions = W_U[:, answer_tokens]
answer_residual_directions = einops.rearrange(
    answer_residual_directions, "d_model batch correct_incorrect -> batch correct_incorrect d_model"
)
logit_diff_directions = answer_residual_directions[:, 0] - answer_residual_directions[:, 1]
"""),
    Cell("""
final_residual_stream = cache["resid_post", -1]
final_token_residual_stream = final_residual_stream[:, -1, :]
scaled_final_token_residual_stream = cache.apply_ln_to_stack(final_token_residual_stream, layer=-1, pos_slice=-1)
average_logit_diff = einsum(
    "batch d_model, batch d_model -> ", scaled_final_token_residual_stream, logit_diff_directions
) / len(prompts)
"""),
    Cell("""
def residual_stack_to_logit_diff(residual_stack, cache):
    scaled_residual_stack = cache.apply_ln_to_stack(residual_stack, layer=-1, pos_slice=-1)
    return einsum(
        "... batch d_model, batch d_model -> ...", scaled_residual_stack, logit_diff_directions
    ) / len(prompts)

accumulated_residual, labels = cache.accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1, return_labels=True)
logit_lens_logit_diffs = residual_stack_to_logit_diff(accumulated_residual, cache)
x_axis = np.arange(model.cfg.n_layers * 2 + 1) / 2
"""),
    Cell("""
per_layer_residual, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
per_layer_logit_diffs = residual_stack_to_logit_diff(per_layer_residual, cache)
"""),
    Cell("""
per_head_residual, labels = cache.stack_head_results(layer=-1, pos_slice=-1, return_labels=True)
per_head_logit_diffs = residual_stack_to_logit_diff(per_head_residual, cache)
per_head_logit_diffs = einops.rearrange(
    per_head_logit_diffs,
    "(layer head_index) -> layer head_index",
    layer=model.cfg.n_layers,
    head_index=model.cfg.n_heads,
)
"""),
    Cell("""
def visualize_attention_patterns(heads, local_cache, local_tokens, title="", max_width=700):
    if isinstance(heads, int):
        heads = [heads]
    labels = []
    patterns = []
    batch_index = 0
    for head in heads:
        layer = head // model.cfg.n_heads
        head_index = head % model.cfg.n_heads
        labels.append(f"L{layer}H{head_index}")
        patterns.append(local_cache["attn", layer][batch_index, head_index])
    str_tokens = model.to_str_tokens(local_tokens)
    return labels, str_tokens, torch.stack(patterns, dim=0)

top_k = 3
top_positive_logit_attr_heads = torch.topk(per_head_logit_diffs.flatten(), k=top_k).indices
positive = visualize_attention_patterns(top_positive_logit_attr_heads, cache, tokens[0], "Top Positive")
top_negative_logit_attr_heads = torch.topk(-per_head_logit_diffs.flatten(), k=top_k).indices
negative = visualize_attention_patterns(top_negative_logit_attr_heads, cache, tokens[0], title="Top Negative")
"""),
    Cell("""
corrupted_prompts = []
for i in range(0, len(prompts), 2):
    corrupted_prompts.append(prompts[i + 1])
    corrupted_prompts.append(prompts[i])
corrupted_tokens = model.to_tokens(corrupted_prompts, prepend_bos=True)
corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens, return_type="logits")
corrupted_average_logit_diff = logits_to_ave_logit_diff(corrupted_logits, answer_tokens)
corrupted_strings = model.to_string(corrupted_tokens)
"""),
    Cell("""
def patch_residual_component(corrupted_residual_component, hook, pos, clean_cache):
    clean_value = clean_cache[hook.name][:, pos, :].clone()
    corrupted_residual_component = corrupted_residual_component.clone()
    corrupted_residual_component[:, pos : pos + 1, :] = clean_value.unsqueeze(1)
    return corrupted_residual_component

def normalize_patched_logit_diff(patched_logit_diff):
    return (patched_logit_diff - corrupted_average_logit_diff) / (
        original_average_logit_diff - corrupted_average_logit_diff
    )

patched_residual_stream_diff = torch.zeros(model.cfg.n_layers, tokens.shape[1], device=device, dtype=torch.float32)
for layer in range(model.cfg.n_layers):
    for position in range(tokens.shape[1]):
        hook_fn = partial(patch_residual_component, pos=position, clean_cache=cache)
        patched_logits = model.run_with_hooks(
            corrupted_tokens,
            fwd_hooks=[(utils.get_act_name("resid_pre", layer), hook_fn)],
            return_type="logits",
        )
        patched_logit_diff = logits_to_ave_logit_diff(patched_logits, answer_tokens)
        patched_residual_stream_diff[layer, position] = normalize_patched_logit_diff(patched_logit_diff)
prompt_position_labels = [f"{tok}_{i}" for i, tok in enumerate(model.to_str_tokens(tokens[0]))]
"""),
    Cell("""
patched_attn_diff = torch.zeros(model.cfg.n_layers, tokens.shape[1], device=device, dtype=torch.float32)
patched_mlp_diff = torch.zeros(model.cfg.n_layers, tokens.shape[1], device=device, dtype=torch.float32)
for layer in range(model.cfg.n_layers):
    for position in range(tokens.shape[1]):
        hook_fn = partial(patch_residual_component, pos=position, clean_cache=cache)
        patched_attn_logits = model.run_with_hooks(
            corrupted_tokens,
            fwd_hooks=[(utils.get_act_name("attn_out", layer), hook_fn)],
            return_type="logits",
        )
        patched_attn_logit_diff = logits_to_ave_logit_diff(patched_attn_logits, answer_tokens)
        patched_mlp_logits = model.run_with_hooks(
            corrupted_tokens,
            fwd_hooks=[(utils.get_act_name("mlp_out", layer), hook_fn)],
            return_type="logits",
        )
        patched_mlp_logit_diff = logits_to_ave_logit_diff(patched_mlp_logits, answer_tokens)
        patched_attn_diff[layer, position] = normalize_patched_logit_diff(patched_attn_logit_diff)
        patched_mlp_diff[layer, position] = normalize_patched_logit_diff(patched_mlp_logit_diff)
"""),
    Cell("""
def patch_head_vector(corrupted_head_vector, hook, head_index, clean_cache):
    clean_value = clean_cache[hook.name][:, :, head_index, :].clone()
    corrupted_head_vector = corrupted_head_vector.clone()
    corrupted_head_vector[:, :, head_index : head_index + 1, :] = clean_value.unsqueeze(2)
    return corrupted_head_vector

patched_head_z_diff = torch.zeros(model.cfg.n_layers, model.cfg.n_heads, device=device, dtype=torch.float32)
for layer in range(model.cfg.n_layers):
    for head_index in range(model.cfg.n_heads):
        hook_fn = partial(patch_head_vector, head_index=head_index, clean_cache=cache)
        patched_logits = model.run_with_hooks(
            corrupted_tokens,
            fwd_hooks=[(utils.get_act_name("z", layer, "attn"), hook_fn)],
            return_type="logits",
        )
        patched_logit_diff = logits_to_ave_logit_diff(patched_logits, answer_tokens)
        patched_head_z_diff[layer, head_index] = normalize_patched_logit_diff(patched_logit_diff)
"""),
    Cell(
        """
patched_head_v_diff = torch.zeros(model.cfg.n_layers, model.cfg.n_heads, device=device, dtype=torch.float32)
for layer in range(model.cfg.n_layers):
    for head_index in range(model.cfg.n_heads):
        hook_fn = partial(patch_head_vector, head_index=head_index, clean_cache=cache)
        patched_logits = model.run_with_hooks(
            corrupted_tokens,
            fwd_hooks=[(utils.get_act_name("v", layer, "attn"), hook_fn)],
            return_type="logits",
        )
        patched_logit_diff = logits_to_ave_logit_diff(patched_logits, answer_tokens)
        patched_head_v_diff[layer, head_index] = normalize_patched_logit_diff(patched_logit_diff)
""",
        gqa="raises",
    ),
    Cell("""
def patch_head_pattern(corrupted_head_pattern, hook, head_index, clean_cache):
    clean_value = clean_cache[hook.name][:, head_index, :, :].clone()
    corrupted_head_pattern = corrupted_head_pattern.clone()
    corrupted_head_pattern[:, head_index : head_index + 1, :, :] = clean_value.unsqueeze(1)
    return corrupted_head_pattern

patched_head_attn_diff = torch.zeros(model.cfg.n_layers, model.cfg.n_heads, device=device, dtype=torch.float32)
for layer in range(model.cfg.n_layers):
    for head_index in range(model.cfg.n_heads):
        hook_fn = partial(patch_head_pattern, head_index=head_index, clean_cache=cache)
        patched_logits = model.run_with_hooks(
            corrupted_tokens,
            fwd_hooks=[(utils.get_act_name("attn", layer, "attn"), hook_fn)],
            return_type="logits",
        )
        patched_logit_diff = logits_to_ave_logit_diff(patched_logits, answer_tokens)
        patched_head_attn_diff[layer, head_index] = normalize_patched_logit_diff(patched_logit_diff)
head_labels = [f"L{l}H{h}" for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
"""),
    Cell("""
def patch_direct_path_A_output_to_B_attn_act(
    corrupted_attn_act, hook, attn_act_type, A_layer, A_head_index, B_layer, B_head_index, clean_cache, corrupted_cache
):
    A_output_act_name = utils.get_act_name("result", A_layer, "attn")
    clean_A_output = clean_cache[A_output_act_name][:, :, A_head_index, :]
    corrupted_A_output = corrupted_cache[A_output_act_name][:, :, A_head_index, :]
    corrupted_B_act = corrupted_attn_act[:, :, B_head_index, :]
    W_B = _get_attention_weights(model.blocks[B_layer].attn, attn_act_type)[B_head_index]
    corrupted_ln1_scale = corrupted_cache[utils.get_act_name("scale", B_layer, "ln1")]
    patched_B_act = corrupted_B_act + (clean_A_output - corrupted_A_output) @ W_B / corrupted_ln1_scale
    patched_attn_act = corrupted_attn_act.clone()
    patched_attn_act[:, :, B_head_index, :] = patched_B_act
    return patched_attn_act

def direct_path_output_to_attn_act_diffs(output_layer, attn_act_layer, attn_act_type):
    A_to_B_diffs = torch.zeros(model.cfg.n_heads, model.cfg.n_heads, device=device, dtype=torch.float32)
    for A in range(model.cfg.n_heads):
        for B in range(model.cfg.n_heads):
            patch_hook = (
                utils.get_act_name(attn_act_type, attn_act_layer, "attn"),
                partial(
                    patch_direct_path_A_output_to_B_attn_act,
                    attn_act_type=attn_act_type,
                    A_layer=output_layer,
                    A_head_index=A,
                    B_layer=attn_act_layer,
                    B_head_index=B,
                    clean_cache=cache,
                    corrupted_cache=corrupted_cache,
                ),
            )
            patched_logits = model.run_with_hooks(corrupted_tokens, fwd_hooks=[patch_hook], return_type="logits")
            patched_logit_diff = logits_to_ave_logit_diff(patched_logits, answer_tokens)
            A_to_B_diffs[A, B] = normalize_patched_logit_diff(patched_logit_diff)
    return A_to_B_diffs

def _get_attention_weights(attn, attn_act_type):
    if attn_act_type == "q":
        return attn.W_Q
    if attn_act_type == "k":
        return attn.W_K
    if attn_act_type == "v":
        return attn.W_V
    raise ValueError

query_diffs = direct_path_output_to_attn_act_diffs(0, 1, "q")
"""),
    Cell(
        """
def test_direct_path_patching():
    output_layer, value_layer = (0, 1)
    return direct_path_output_to_attn_act_diffs(output_layer, value_layer, "v")

value_diffs = test_direct_path_patching()
""",
        gqa="raises",
    ),
    Cell("""
top_k = 4
top_heads_by_output_patch = torch.topk(patched_head_z_diff.abs().flatten(), k=top_k).indices
first_mid_layer = 1
early_heads = top_heads_by_output_patch[top_heads_by_output_patch < model.cfg.n_heads * first_mid_layer]
late_heads = top_heads_by_output_patch[model.cfg.n_heads * first_mid_layer <= top_heads_by_output_patch]
early = visualize_attention_patterns(early_heads, cache, tokens[0], title="Top Early Heads")
late = visualize_attention_patterns(late_heads, cache, tokens[0], title="Top Late Heads")
"""),
    Cell("""
example_text = "Research in mech interp seeks to explain models."
example_repeated_text = example_text + example_text
example_repeated_tokens = model.to_tokens(example_repeated_text, prepend_bos=True)
example_repeated_logits, example_repeated_cache = model.run_with_cache(example_repeated_tokens)
induction_head_labels = [5, 6]
induction_view = visualize_attention_patterns(induction_head_labels, example_repeated_cache, example_repeated_tokens)
"""),
    Cell("""
seq_len = 50
batch_size = 2
prev_token_scores = torch.zeros((model.cfg.n_layers, model.cfg.n_heads), device=device)

def prev_token_hook(pattern, hook):
    layer = hook.layer()
    diagonal = pattern.diagonal(offset=1, dim1=-1, dim2=-2)
    prev_token_scores[layer] = einops.reduce(diagonal, "batch head_index diagonal -> head_index", "mean")

duplicate_token_scores = torch.zeros((model.cfg.n_layers, model.cfg.n_heads), device=device)

def duplicate_token_hook(pattern, hook):
    layer = hook.layer()
    diagonal = pattern.diagonal(offset=seq_len, dim1=-1, dim2=-2)
    duplicate_token_scores[layer] = einops.reduce(diagonal, "batch head_index diagonal -> head_index", "mean")

induction_scores = torch.zeros((model.cfg.n_layers, model.cfg.n_heads), device=device)

def induction_hook(pattern, hook):
    layer = hook.layer()
    diagonal = pattern.diagonal(offset=seq_len - 1, dim1=-1, dim2=-2)
    induction_scores[layer] = einops.reduce(diagonal, "batch head_index diagonal -> head_index", "mean")

torch.manual_seed(0)
original_tokens = torch.randint(0, 256, size=(batch_size, seq_len), device="cpu").to(device)
repeated_tokens = einops.repeat(original_tokens, "batch seq_len -> batch (2 seq_len)").to(device)
pattern_filter = lambda act_name: act_name.endswith("hook_pattern")
loss = model.run_with_hooks(
    repeated_tokens,
    return_type="loss",
    fwd_hooks=[
        (pattern_filter, prev_token_hook),
        (pattern_filter, duplicate_token_hook),
        (pattern_filter, induction_hook),
    ],
)
corners = [utils.get_corner(s).detach().cpu() for s in (prev_token_scores, duplicate_token_scores, induction_scores)]
"""),
    Cell("""
top_name_mover = per_head_logit_diffs.flatten().argmax().item()
top_name_mover_layer = top_name_mover // model.cfg.n_heads
top_name_mover_head = top_name_mover % model.cfg.n_heads

def ablate_top_head_hook(z: Float[torch.Tensor, "batch pos head_index d_head"], hook):
    z = z.clone()
    z[:, -1, top_name_mover_head, :] = 0
    return z

model.blocks[top_name_mover_layer].attn.hook_z.add_hook(ablate_top_head_hook)
ablated_logits, ablated_cache = model.run_with_cache(tokens)
post_ablation = logits_to_ave_logit_diff(ablated_logits, answer_tokens).item()
naive_prediction = original_average_logit_diff - per_head_logit_diffs.flatten()[top_name_mover].item()
"""),
    Cell("""
per_head_ablated_residual, labels = ablated_cache.stack_head_results(layer=-1, pos_slice=-1, return_labels=True)
per_head_ablated_logit_diffs = residual_stack_to_logit_diff(per_head_ablated_residual, ablated_cache)
per_head_ablated_logit_diffs = per_head_ablated_logit_diffs.reshape(model.cfg.n_layers, model.cfg.n_heads)
ln_ratio = round((cache["ln_final.hook_scale"][:, -1] / ablated_cache["ln_final.hook_scale"][:, -1]).mean().item(), 3)
ablation_scale = ablated_cache["ln_final.hook_scale"][:, -1].detach().cpu().round(decimals=2)
"""),
]
