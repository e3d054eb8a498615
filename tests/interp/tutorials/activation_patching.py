"""TransformerLens's Activation Patching demo (`demos/Activation_Patching_in_TL_Demo.ipynb`): TL's `patching`
functions handed our model. The by-position sweep of every head activation (NBVAL_SKIP there, 5x the by-position
head-output sweep that runs here) is left out; the induction half uses the same model in place of attn-only-2l."""

from tests.interp.tutorials.cells import Cell

ACTIVATION_PATCHING = [
    Cell("""
prompts = ["When J and M went out, J gave it to ", "When J and M went out, M gave it to ",
           "When T and S went off, S gave it to ", "When T and S went off, T gave it to "]
answers = [("M", "J"), ("J", "M"), ("T", "S"), ("S", "T")]

clean_tokens = model.to_tokens(prompts)
corrupted_tokens = clean_tokens[[(i + 1 if i % 2 == 0 else i - 1) for i in range(len(clean_tokens))]]
clean_string = model.to_string(clean_tokens[0])
answer_token_indices = torch.tensor(
    [[model.to_single_token(answers[i][j]) for j in range(2)] for i in range(len(answers))], device=model.cfg.device
)
"""),
    Cell("""
def get_logit_diff(logits, answer_token_indices=answer_token_indices):
    if len(logits.shape) == 3:
        logits = logits[:, -1, :]
    correct_logits = logits.gather(1, answer_token_indices[:, 0].unsqueeze(1))
    incorrect_logits = logits.gather(1, answer_token_indices[:, 1].unsqueeze(1))
    return (correct_logits - incorrect_logits).mean()

clean_logits, clean_cache = model.run_with_cache(clean_tokens)
corrupted_logits, corrupted_cache = model.run_with_cache(corrupted_tokens)
clean_logit_diff = get_logit_diff(clean_logits, answer_token_indices).item()
corrupted_logit_diff = get_logit_diff(corrupted_logits, answer_token_indices).item()
"""),
    Cell("""
CLEAN_BASELINE = clean_logit_diff
CORRUPTED_BASELINE = corrupted_logit_diff
def ioi_metric(logits, answer_token_indices=answer_token_indices):
    return (get_logit_diff(logits, answer_token_indices) - CORRUPTED_BASELINE) / (CLEAN_BASELINE - CORRUPTED_BASELINE)

baselines = (ioi_metric(clean_logits).item(), ioi_metric(corrupted_logits).item())
"""),
    Cell("""
resid_pre_act_patch_results = patching.get_act_patch_resid_pre(model, corrupted_tokens, clean_cache, ioi_metric)
labels = [f"{tok} {i}" for i, tok in enumerate(model.to_str_tokens(clean_tokens[0]))]
"""),
    Cell("""
attn_head_out_all_pos_act_patch_results = patching.get_act_patch_attn_head_out_all_pos(
    model, corrupted_tokens, clean_cache, ioi_metric
)
"""),
    Cell("""
ALL_HEAD_LABELS = [f"L{i}H{j}" for i in range(model.cfg.n_layers) for j in range(model.cfg.n_heads)]
attn_head_out_act_patch_results = patching.get_act_patch_attn_head_out_by_pos(
    model, corrupted_tokens, clean_cache, ioi_metric
)
attn_head_out_act_patch_results = einops.rearrange(
    attn_head_out_act_patch_results, "layer pos head -> (layer head) pos"
)
"""),
    Cell("every_block_result = patching.get_act_patch_block_every(model, corrupted_tokens, clean_cache, ioi_metric)"),
    Cell(
        """
every_head_all_pos_act_patch_result = patching.get_act_patch_attn_head_all_pos_every(
    model, corrupted_tokens, clean_cache, ioi_metric
)
"""
    ),
    Cell("""
attn_only = model
batch = 4
seq_len = 20
rand_tokens_A = torch.randint(0, 256, (batch, seq_len)).to(attn_only.cfg.device)
rand_tokens_B = torch.randint(0, 256, (batch, seq_len)).to(attn_only.cfg.device)
rand_tokens_C = torch.randint(0, 256, (batch, seq_len)).to(attn_only.cfg.device)
bos = torch.tensor([attn_only.tokenizer.bos_token_id] * batch)[:, None].to(attn_only.cfg.device)
clean_tokens_induction = torch.cat([bos, rand_tokens_A, rand_tokens_A], dim=1).to(attn_only.cfg.device)
corrupted_tokens_induction = torch.cat([bos, rand_tokens_A, rand_tokens_B], dim=1).to(attn_only.cfg.device)
"""),
    Cell("""
clean_logits_induction, clean_cache_induction = attn_only.run_with_cache(clean_tokens_induction)
corrupted_logits_induction, corrupted_cache_induction = attn_only.run_with_cache(corrupted_tokens_induction)

def induction_loss(logits, answer_token_indices=rand_tokens_A):
    seq_len = answer_token_indices.shape[1]
    final_logits = logits[:, -seq_len:-1]
    final_log_probs = final_logits.log_softmax(-1)
    return final_log_probs.gather(-1, answer_token_indices[:, 1:].unsqueeze(-1)).mean()
CLEAN_BASELINE_INDUCTION = induction_loss(clean_logits_induction).item()
CORRUPTED_BASELINE_INDUCTION = induction_loss(corrupted_logits_induction).item()
"""),
    Cell(
        """
every_head_all_pos_act_patch_result = patching.get_act_patch_attn_head_all_pos_every(
    attn_only, corrupted_tokens_induction, clean_cache_induction, induction_loss
)
"""
    ),
    Cell(
        """
corrupted_tokens_induction_BA = torch.cat([bos, rand_tokens_B, rand_tokens_A], dim=1).to(attn_only.cfg.device)
corrupted_tokens_induction_BB = torch.cat([bos, rand_tokens_B, rand_tokens_B], dim=1).to(attn_only.cfg.device)
every_head_all_pos_act_patch_result = patching.get_act_patch_attn_head_all_pos_every(
    attn_only, corrupted_tokens_induction_BA, clean_cache_induction, induction_loss
)
"""
    ),
]
