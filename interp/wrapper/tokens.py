"""Token helpers of `HookedModel`, named as in TransformerLens: `to_str_tokens`, `to_single_token`,
`test_prompt`, `loss`.

    model.to_str_tokens("The capital of France is")   # ['The', ' capital', ' of', ' France', ' is']
    model.test_prompt("The capital of France is", " Paris")

Every text argument takes `prepend_bos` with the toolkit's one rule (`interp.data.tokenize_texts`):
None keeps the tokenizer's own convention, True/False force a BOS token on or off.
"""

from __future__ import annotations

import torch
from torch import Tensor


class TokensMixin:
    """Needs `tokenizer`, `to_tokens`, `forward` (see `HookedModel`)."""

    def _need_tokenizer(self):
        if self.tokenizer is None:
            raise ValueError("this model has no tokenizer; pass token ids, or build HookedModel(hf_model, tokenizer)")
        return self.tokenizer

    def to_str_tokens(self, inputs, prepend_bos: bool | None = None) -> list[str] | list[list[str]]:
        """Each token of a text (or of ids) as its own string; a list of lists for a batch of texts.

        Padding is dropped. Token ids may be an int, a [pos] or a [batch, pos] tensor; a [1, pos] tensor gives
        one flat list, as in TransformerLens (`model.to_str_tokens(model.to_tokens(text))`).
        """
        tok = self._need_tokenizer()
        if isinstance(inputs, int):
            return [tok.decode([inputs])]
        if isinstance(inputs, Tensor) and (inputs.ndim <= 1 or (inputs.ndim == 2 and inputs.shape[0] == 1)):
            return [tok.decode([int(t)]) for t in inputs.reshape(-1)]
        ids, mask = self.to_tokens(inputs, prepend_bos=prepend_bos, return_mask=True)
        rows = [[tok.decode([int(t)]) for t, m in zip(r, mk) if m] for r, mk in zip(ids, mask)]
        return rows[0] if isinstance(inputs, str) else rows

    def to_single_token(self, string: str) -> int:
        """The id of a string that is exactly one token (no BOS); an error naming its pieces otherwise."""
        tok = self._need_tokenizer()
        ids = tok(string, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            pieces = [tok.decode([i]) for i in ids]
            raise ValueError(
                f"{string!r} is {len(ids)} tokens {pieces}, not one; pass a single token "
                "(check it with model.to_str_tokens(text, prepend_bos=False))"
            )
        return int(ids[0])

    def test_prompt(
        self,
        prompt: str,
        answer: str,
        prepend_bos: bool | None = None,
        prepend_space_to_answer: bool = True,
        top_k: int = 10,
        print_details: bool = True,
    ) -> dict:
        """Score a one-token answer to a prompt: its rank, log-probability and probability at the last
        position, next to the model's top-k. Prints a short report unless `print_details=False`;
        returns it as a dict.

        The answer must be one token (after a leading space is added, when `prepend_space_to_answer`).
        """
        if not isinstance(prompt, str) or not isinstance(answer, str):
            raise TypeError("test_prompt takes one prompt string and one answer string")
        if prepend_space_to_answer and not answer.startswith(" "):
            answer = " " + answer
        tok = self._need_tokenizer()
        pieces = tok(answer, add_special_tokens=False)["input_ids"]
        if len(pieces) != 1:
            raise ValueError(
                f"answer {answer!r} is {len(pieces)} tokens {[tok.decode([i]) for i in pieces]}; test_prompt scores "
                "the next token only: pass its first token as the answer, or move the rest into the prompt"
            )
        answer_id = pieces[0]
        with torch.no_grad():
            logits = self.forward(prompt, prepend_bos=prepend_bos)[0, -1].float()
        logprobs = logits.log_softmax(-1)
        rank = int((logprobs > logprobs[answer_id]).sum())
        top = logprobs.topk(top_k)
        report = {
            "prompt_tokens": self.to_str_tokens(prompt, prepend_bos=prepend_bos),
            "answer": answer,
            "answer_id": int(answer_id),
            "rank": rank,
            "logprob": float(logprobs[answer_id]),
            "prob": float(logprobs[answer_id].exp()),
            "top": [(tok.decode([int(i)]), float(lp)) for lp, i in zip(top.values, top.indices)],
        }
        if print_details:
            print("Tokenized prompt:", report["prompt_tokens"])
            print("Tokenized answer:", [answer])
            print(
                f"Performance on answer token: rank {rank}  logprob {report['logprob']:.2f}  prob {report['prob']:.2%}"
            )
            for i, (text, lp) in enumerate(report["top"]):
                print(f"Top {i}th token. Logprob {lp:.2f}  prob {torch.tensor(lp).exp():.2%}  token {text!r}")
        return report

    def loss(self, inputs, per_token: bool = False, prepend_bos: bool | None = None, grad: bool = False) -> Tensor:
        """Next-token cross-entropy: the mean over real (unpadded) targets, or [batch, pos - 1] with
        `per_token=True` (0 at padded targets). Runs without autograd unless `grad=True`."""
        ids, mask = self.to_tokens(inputs, prepend_bos=prepend_bos, return_mask=True)
        with torch.set_grad_enabled(grad):
            logits = self.hf_model(input_ids=ids, attention_mask=mask, use_cache=False).logits
            return per_token_loss(logits, ids, mask) if per_token else next_token_loss(logits, ids, mask)

    def loss_fn(self, logits: Tensor, tokens: Tensor, attention_mask: Tensor | None = None, per_token: bool = False):
        """TransformerLens's `loss_fn`: next-token cross-entropy of given logits against `tokens`."""
        mask = torch.ones_like(tokens) if attention_mask is None else attention_mask
        tokens, mask = tokens.to(logits.device), mask.to(logits.device)
        return per_token_loss(logits, tokens, mask) if per_token else next_token_loss(logits, tokens, mask)


def per_token_loss(logits: Tensor, ids: Tensor, mask: Tensor) -> Tensor:
    """[batch, pos - 1] cross-entropy of predicting token t+1 from position t, 0 at padded targets."""
    flat = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
    return flat.view(ids.shape[0], -1) * mask[:, 1:].to(flat.dtype)


def next_token_loss(logits: Tensor, ids: Tensor, mask: Tensor) -> Tensor:
    """Mean cross-entropy of predicting token t+1 from position t, over non-padded targets."""
    flat = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none")
    keep = mask[:, 1:].flatten().to(flat.dtype)
    return (flat * keep).sum() / keep.sum().clamp(min=1)
