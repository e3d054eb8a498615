"""ARENA 1.4.1, Indirect Object Identification: the solutions' cells (logit attribution, activation patching with
TL's `patching` and by hand, path patching to the logits and to later heads' q/v, mean ablation of a circuit by a
permanent hook, copying scores). ARENA's `IOIDataset` module is stood in for by `TinyIOI` (see `cells.py`)."""

from tests.interp.tutorials.cells import IOI_TEMPLATES, Cell

IOI = [
    Cell("""
example_prompt = "After J and M went to the store, J gave a drink to "
example_answer = "M"
utils.test_prompt(example_prompt, example_answer, model, prepend_bos=True, prepend_space_to_answer=False)
"""),
    Cell(
        IOI_TEMPLATES
        + """
name_pairs = [("J", "M"), ("T", "S"), ("D", "A"), ("R", "E")]
prompts = [prompt.format(name) for (prompt, names) in zip(prompt_format, name_pairs) for name in names[::-1]]
answers = [names[::i] for names in name_pairs for i in (1, -1)]
answer_tokens = t.concat([model.to_tokens(names, prepend_bos=False).T for names in answers])
tokens = model.to_tokens(prompts, prepend_bos=True)
original_logits, cache = model.run_with_cache(tokens)
"""
    ),
    Cell("""
def logits_to_ave_logit_diff(logits, answer_tokens=answer_tokens, per_prompt=False):
    final_logits = logits[:, -1, :]
    answer_logits = final_logits.gather(dim=-1, index=answer_tokens)
    correct_logits, incorrect_logits = answer_logits.unbind(dim=-1)
    answer_logit_diff = correct_logits - incorrect_logits
    return answer_logit_diff if per_prompt else answer_logit_diff.mean()

original_per_prompt_diff = logits_to_ave_logit_diff(original_logits, answer_tokens, per_prompt=True)
original_average_logit_diff = logits_to_ave_logit_diff(original_logits, answer_tokens)
"""),
    Cell("""
answer_residual_directions = model.tokens_to_residual_directions(answer_tokens)
correct_residual_directions, incorrect_residual_directions = answer_residual_directions.unbind(dim=1)
logit_diff_directions = correct_residual_directions - incorrect_residual_directions
"""),
    Cell("""
final_residual_stream = cache["resid_post", -1]
final_token_residual_stream = final_residual_stream[:, -1, :]
scaled_final_token_residual_stream = cache.apply_ln_to_stack(final_token_residual_stream, layer=-1, pos_slice=-1)
average_logit_diff = einops.einsum(
    scaled_final_token_residual_stream, logit_diff_directions, "batch d_model, batch d_model ->"
) / len(prompts)
t.testing.assert_close(average_logit_diff, original_average_logit_diff)
"""),
    Cell("""
def residual_stack_to_logit_diff(residual_stack, cache, logit_diff_directions=logit_diff_directions):
    batch_size = residual_stack.size(-2)
    scaled_residual_stack = cache.apply_ln_to_stack(residual_stack, layer=-1, pos_slice=-1)
    return einops.einsum(
        scaled_residual_stack, logit_diff_directions, "... batch d_model, batch d_model -> ..."
    ) / batch_size

t.testing.assert_close(residual_stack_to_logit_diff(final_token_residual_stream, cache), original_average_logit_diff)
accumulated_residual, labels = cache.accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1, return_labels=True)
logit_lens_logit_diffs = residual_stack_to_logit_diff(accumulated_residual, cache)
per_layer_residual, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
per_layer_logit_diffs = residual_stack_to_logit_diff(per_layer_residual, cache)
per_head_residual, labels = cache.stack_head_results(layer=-1, pos_slice=-1, return_labels=True)
per_head_residual = einops.rearrange(per_head_residual, "(layer head) ... -> layer head ...", layer=model.cfg.n_layers)
per_head_logit_diffs = residual_stack_to_logit_diff(per_head_residual, cache)
"""),
    Cell("""
def topk_of_Nd_tensor(tensor, k):
    i = t.topk(tensor.flatten(), k).indices
    return np.array(np.unravel_index(utils.to_numpy(i), tensor.shape)).T.tolist()

top_heads = topk_of_Nd_tensor(per_head_logit_diffs, k=3)
attn_patterns_for_important_heads = t.stack([cache["pattern", layer][:, head][0] for layer, head in top_heads])
"""),
    Cell("""
clean_tokens = tokens
indices = [i + 1 if i % 2 == 0 else i - 1 for i in range(len(tokens))]
corrupted_tokens = clean_tokens[indices]
clean_logits, clean_cache = model.run_with_cache(clean_tokens)
corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens)
clean_logit_diff = logits_to_ave_logit_diff(clean_logits, answer_tokens)
corrupted_logit_diff = logits_to_ave_logit_diff(corrupted_logits, answer_tokens)

def ioi_metric(
    logits, answer_tokens=answer_tokens, corrupted_logit_diff=corrupted_logit_diff, clean_logit_diff=clean_logit_diff
):
    patched_logit_diff = logits_to_ave_logit_diff(logits, answer_tokens)
    return (patched_logit_diff - corrupted_logit_diff) / (clean_logit_diff - corrupted_logit_diff)

t.testing.assert_close(ioi_metric(clean_logits).item(), 1.0)
t.testing.assert_close(ioi_metric(corrupted_logits).item(), 0.0)
"""),
    Cell("""
act_patch_resid_pre = patching.get_act_patch_resid_pre(
    model=model, corrupted_tokens=corrupted_tokens, clean_cache=clean_cache, patching_metric=ioi_metric
)

def patch_residual_component(corrupted_residual_component, hook, pos, clean_cache):
    corrupted_residual_component[:, pos, :] = clean_cache[hook.name][:, pos, :]
    return corrupted_residual_component

def get_act_patch_resid_pre(model, corrupted_tokens, clean_cache, patching_metric):
    model.reset_hooks()
    seq_len = corrupted_tokens.size(1)
    results = t.zeros(model.cfg.n_layers, seq_len, device=device, dtype=t.float32)
    for layer in range(model.cfg.n_layers):
        for position in range(seq_len):
            hook_fn = partial(patch_residual_component, pos=position, clean_cache=clean_cache)
            patched_logits = model.run_with_hooks(
                corrupted_tokens, fwd_hooks=[(utils.get_act_name("resid_pre", layer), hook_fn)]
            )
            results[layer, position] = patching_metric(patched_logits)
    return results

act_patch_resid_pre_own = get_act_patch_resid_pre(model, corrupted_tokens, clean_cache, ioi_metric)
t.testing.assert_close(act_patch_resid_pre, act_patch_resid_pre_own)
"""),
    Cell(
        "act_patch_block_every = patching.get_act_patch_block_every(model, corrupted_tokens, clean_cache, ioi_metric)"
    ),
    Cell("""
act_patch_attn_head_out_all_pos = patching.get_act_patch_attn_head_out_all_pos(
    model, corrupted_tokens, clean_cache, ioi_metric
)

def patch_head_vector(corrupted_head_vector, hook, head_index, clean_cache):
    corrupted_head_vector[:, :, head_index] = clean_cache[hook.name][:, :, head_index]
    return corrupted_head_vector

def get_act_patch_attn_head_out_all_pos(model, corrupted_tokens, clean_cache, patching_metric):
    model.reset_hooks()
    results = t.zeros(model.cfg.n_layers, model.cfg.n_heads, device=device, dtype=t.float32)
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            hook_fn = partial(patch_head_vector, head_index=head, clean_cache=clean_cache)
            patched_logits = model.run_with_hooks(
                corrupted_tokens, fwd_hooks=[(utils.get_act_name("z", layer), hook_fn)], return_type="logits"
            )
            results[layer, head] = patching_metric(patched_logits)
    return results

act_patch_attn_head_out_all_pos_own = get_act_patch_attn_head_out_all_pos(
    model, corrupted_tokens, clean_cache, ioi_metric
)
t.testing.assert_close(act_patch_attn_head_out_all_pos, act_patch_attn_head_out_all_pos_own)
"""),
    Cell(
        """
act_patch_attn_head_all_pos_every = patching.get_act_patch_attn_head_all_pos_every(
    model, corrupted_tokens, clean_cache, ioi_metric
)
"""
    ),
    Cell(
        """
top_heads = topk_of_Nd_tensor(act_patch_attn_head_all_pos_every[3], k=2)
attn_patterns_for_important_heads = t.stack([cache["pattern", layer][:, head].mean(0) for layer, head in top_heads])
"""
    ),
    Cell("""
ioi_dataset = TinyIOI(model, prompts, [a[0] for a in answers], [a[1] for a in answers])
abc_order = [2, 3, 4, 5, 6, 7, 0, 1]
abc_answers = [answers[i] for i in abc_order]
abc_dataset = TinyIOI(model, [prompts[i] for i in abc_order], [a[0] for a in abc_answers], [a[1] for a in abc_answers])

def logits_to_ave_logit_diff_2(logits, ioi_dataset=ioi_dataset, per_prompt=False):
    io_logits = logits[range(logits.size(0)), ioi_dataset.word_idx["end"], ioi_dataset.io_tokenIDs]
    s_logits = logits[range(logits.size(0)), ioi_dataset.word_idx["end"], ioi_dataset.s_tokenIDs]
    answer_logit_diff = io_logits - s_logits
    return answer_logit_diff if per_prompt else answer_logit_diff.mean()

model.reset_hooks(including_permanent=True)
ioi_logits_original, ioi_cache = model.run_with_cache(ioi_dataset.toks)
abc_logits_original, abc_cache = model.run_with_cache(abc_dataset.toks)
ioi_average_logit_diff = logits_to_ave_logit_diff_2(ioi_logits_original).item()
abc_average_logit_diff = logits_to_ave_logit_diff_2(abc_logits_original).item()

def ioi_metric_2(
    logits,
    clean_logit_diff=ioi_average_logit_diff,
    corrupted_logit_diff=abc_average_logit_diff,
    ioi_dataset=ioi_dataset,
):
    patched_logit_diff = logits_to_ave_logit_diff_2(logits, ioi_dataset)
    return (patched_logit_diff - clean_logit_diff) / (clean_logit_diff - corrupted_logit_diff)
"""),
    Cell("""
def patch_or_freeze_head_vectors(orig_head_vector, hook, new_cache, orig_cache, head_to_patch):
    orig_head_vector[...] = orig_cache[hook.name][...]
    if head_to_patch[0] == hook.layer():
        orig_head_vector[:, :, head_to_patch[1]] = new_cache[hook.name][:, :, head_to_patch[1]]
    return orig_head_vector

def get_path_patch_head_to_final_resid_post(
    model, patching_metric, new_dataset=abc_dataset, orig_dataset=ioi_dataset, new_cache=None, orig_cache=None
):
    model.reset_hooks()
    results = t.zeros(model.cfg.n_layers, model.cfg.n_heads, device=device, dtype=t.float32)
    resid_post_hook_name = utils.get_act_name("resid_post", model.cfg.n_layers - 1)
    resid_post_name_filter = lambda name: name == resid_post_hook_name
    z_name_filter = lambda name: name.endswith("z")
    if new_cache is None:
        _, new_cache = model.run_with_cache(new_dataset.toks, names_filter=z_name_filter, return_type=None)
    if orig_cache is None:
        _, orig_cache = model.run_with_cache(orig_dataset.toks, names_filter=z_name_filter, return_type=None)
    for sender_layer in range(model.cfg.n_layers):
        for sender_head in range(model.cfg.n_heads):
            hook_fn = partial(
                patch_or_freeze_head_vectors,
                new_cache=new_cache,
                orig_cache=orig_cache,
                head_to_patch=(sender_layer, sender_head),
            )
            model.add_hook(z_name_filter, hook_fn, level=1)
            _, patched_cache = model.run_with_cache(
                orig_dataset.toks, names_filter=resid_post_name_filter, return_type=None
            )
            assert set(patched_cache.keys()) == {resid_post_hook_name}
            patched_logits = model.unembed(model.ln_final(patched_cache[resid_post_hook_name]))
            results[sender_layer, sender_head] = patching_metric(patched_logits)
            model.reset_hooks()
    return results

path_patch_head_to_final_resid_post = get_path_patch_head_to_final_resid_post(model, ioi_metric_2)
"""),
    Cell("""
def patch_head_input(orig_activation, hook, patched_cache, head_list):
    heads_to_patch = [head for layer, head in head_list if layer == hook.layer()]
    orig_activation[:, :, heads_to_patch] = patched_cache[hook.name][:, :, heads_to_patch]
    return orig_activation

def get_path_patch_head_to_heads(
    receiver_heads, receiver_input, model, patching_metric, new_dataset=abc_dataset, orig_dataset=ioi_dataset
):
    model.reset_hooks()
    assert receiver_input in ("k", "q", "v")
    receiver_layers = set(next(zip(*receiver_heads)))
    receiver_hook_names = [utils.get_act_name(receiver_input, layer) for layer in receiver_layers]
    receiver_hook_names_filter = lambda name: name in receiver_hook_names
    results = t.zeros(max(receiver_layers), model.cfg.n_heads, device=device, dtype=t.float32)
    z_name_filter = lambda name: name.endswith("z")
    _, new_cache = model.run_with_cache(new_dataset.toks, names_filter=z_name_filter, return_type=None)
    _, orig_cache = model.run_with_cache(orig_dataset.toks, names_filter=z_name_filter, return_type=None)
    for sender_layer in range(max(receiver_layers)):
        for sender_head in range(model.cfg.n_heads):
            hook_fn = partial(
                patch_or_freeze_head_vectors,
                new_cache=new_cache,
                orig_cache=orig_cache,
                head_to_patch=(sender_layer, sender_head),
            )
            model.add_hook(z_name_filter, hook_fn, level=1)
            _, patched_cache = model.run_with_cache(
                orig_dataset.toks, names_filter=receiver_hook_names_filter, return_type=None
            )
            hook_fn = partial(patch_head_input, patched_cache=patched_cache, head_list=receiver_heads)
            patched_logits = model.run_with_hooks(
                orig_dataset.toks, fwd_hooks=[(receiver_hook_names_filter, hook_fn)], return_type="logits"
            )
            results[sender_layer, sender_head] = patching_metric(patched_logits)
            model.reset_hooks()
    return results

q_path_patch = get_path_patch_head_to_heads([(1, 0), (1, 3)], "q", model, ioi_metric_2)
"""),
    Cell(
        """
v_path_patch = get_path_patch_head_to_heads([(1, 0), (1, 3)], "v", model, ioi_metric_2)
""",
        gqa="raises",
    ),
    Cell(
        """
def calculate_scatter_embedding_vs_attn(layer, head, cache=ioi_cache, dataset=ioi_dataset):
    z = cache[utils.get_act_name("z", layer)][:, :, head]
    N = z.size(0)
    output = z @ model.W_O[layer, head]
    output_on_end_token = output[t.arange(N), dataset.word_idx["end"]]
    io_unembedding = model.W_U.T[dataset.io_tokenIDs]
    s_unembedding = model.W_U.T[dataset.s_tokenIDs]
    io_projection = einops.einsum(output_on_end_token, io_unembedding, "batch d_model, batch d_model -> batch")
    s_projection = einops.einsum(output_on_end_token, s_unembedding, "batch d_model, batch d_model -> batch")
    attn_from_end_to_io = cache["pattern", layer][t.arange(N), head, dataset.word_idx["end"], dataset.word_idx["IO"]]
    return io_projection, s_projection, attn_from_end_to_io

scatter_values = calculate_scatter_embedding_vs_attn(1, 2)
""",
        compare=False,
    ),
    Cell("""
def compute_means_by_template(means_dataset, model):
    _, means_cache = model.run_with_cache(
        means_dataset.toks.long(), return_type=None, names_filter=lambda name: name.endswith("z")
    )
    n_layers, n_heads, d_head = model.cfg.n_layers, model.cfg.n_heads, model.cfg.d_head
    batch, seq_len = len(means_dataset), means_dataset.max_len
    means = t.zeros(size=(n_layers, batch, seq_len, n_heads, d_head), device=model.cfg.device)
    for layer in range(model.cfg.n_layers):
        z_for_this_layer = means_cache[utils.get_act_name("z", layer)]
        for template_group in means_dataset.groups:
            z_for_this_template = z_for_this_layer[template_group]
            z_means_for_this_template = einops.reduce(
                z_for_this_template, "batch seq head d_head -> seq head d_head", "mean"
            )
            means[layer, template_group] = z_means_for_this_template
    return means

def hook_fn_mask_z(z, hook, heads_and_posns_to_keep, means):
    return t.where(heads_and_posns_to_keep[hook.layer()], z, means[hook.layer()])

def add_mean_ablation_hook(model, means_dataset, heads_and_posns_to_keep, is_permanent=True):
    model.reset_hooks(including_permanent=True)
    means = compute_means_by_template(means_dataset, model)
    hook_fn = partial(hook_fn_mask_z, heads_and_posns_to_keep=heads_and_posns_to_keep, means=means)
    model.add_hook(lambda name: name.endswith("z"), hook_fn, is_permanent=is_permanent)
    return model

keep = t.zeros(model.cfg.n_layers, len(abc_dataset), abc_dataset.max_len, model.cfg.n_heads, 1, dtype=t.bool)
keep[1, :, :, 0] = True
keep[0, range(len(abc_dataset)), abc_dataset.word_idx["end"], 1] = True
model = add_mean_ablation_hook(model, means_dataset=abc_dataset, heads_and_posns_to_keep=keep)
ioi_logits_minimal = model(ioi_dataset.toks)
minimal_logit_diff = logits_to_ave_logit_diff_2(ioi_logits_minimal)
model.reset_hooks(including_permanent=True)
"""),
    Cell(
        """
def get_copying_scores(model, k=5, names=("J", "M", "T", "S", "D", "A")):
    results = t.zeros((model.cfg.n_layers, model.cfg.n_heads), device=device)
    name_tokens = model.to_tokens(list(names), prepend_bos=False)
    name_embeddings = model.embed(name_tokens)
    resid_after_mlp1 = name_embeddings + model.blocks[0].mlp(model.blocks[0].ln2(name_embeddings))
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            output = (resid_after_mlp1 @ model.OV[layer, head]).AB
            logits = model.unembed(model.ln_final(output))
            top_logits = t.topk(logits, k=k, dim=-1).indices
            results[layer, head] = (top_logits == name_tokens[:, :, None]).any(-1).float().mean()
    return results

copying_scores = get_copying_scores(model)
""",
        compare=False,
    ),
]
