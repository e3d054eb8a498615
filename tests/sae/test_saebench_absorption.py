"""The SAEBench absorption referee's own pieces: the word position, the word sample, the summary.

SAEBench's `run_eval` itself runs in `sae.experiments.saebench_absorption` on a real model (its probes need
first-letter knowledge a tiny test model does not have); its numbers are in sae/README.md.
"""

import pytest

from sae.experiments import saebench_absorption as A
from sae.experiments.saebench_referee import add_saebench_path


class SpaceTokenizer:
    """Words (with their leading space) are tokens; anything else splits into characters."""

    def __init__(self, words):
        self.vocab = {w: i for i, w in enumerate(words)}

    def convert_tokens_to_string(self, tokens):
        return "".join(tokens)

    def encode(self, text, add_special_tokens=False):
        if text in self.vocab:
            return [self.vocab[text]]
        out = []
        for i, part in enumerate(text.split(" ")):
            if i == 0 and not part:
                continue
            piece = part if i == 0 else " " + part
            out += [self.vocab[piece]] if piece in self.vocab else [0] * max(len(piece), 1)
        return out


def test_word_position_counts_the_template_tail():
    tok = SpaceTokenizer([" has", " the", " first", " letter"])  # ":" is not a token here: one per character
    assert A.word_position(tok, "{word}") == -1
    assert A.word_position(tok, "{word} has the first letter") == -5
    tok2 = SpaceTokenizer([" has", " the", " first", " letter:"])
    assert A.word_position(tok2, "{word} has the first letter:") == -5


def test_word_sample_is_seeded_alphabetic_and_one_token():
    why = add_saebench_path()
    if why:
        pytest.skip(why)
    words = [f" w{'abcdefghij'[i % 10]}{'klmnopqrst'[i // 10 % 10]}{'uvwxyz'[i // 100 % 6]}" for i in range(600)]
    words = [w.replace(" w", " ") for w in words] + [" 123", "x1", " ab-c"]
    tok = SpaceTokenizer(words)
    a, b = A.absorption_words(tok, 100, seed=1), A.absorption_words(tok, 100, seed=1)
    assert a == b == sorted(a) and len(a) == 100 and len(set(a)) == 100
    assert all(w.strip().isalpha() for w in a)
    assert A.absorption_words(tok, 100, seed=2) != a
    assert all(len(tok.encode(w)) == 1 for w in a)
    firsts = [w.strip()[0] for w in a]
    assert min(firsts.count(c) for c in set(firsts)) >= 10 and len(set(firsts)) == 10  # every letter it has


def test_summary_reads_saebench_output_and_none_when_it_stopped():
    rec = {
        "eval_result_metrics": {
            "mean": {
                "mean_absorption_fraction_score": 0.1,
                "mean_full_absorption_score": 0.05,
                "mean_num_split_features": 1.2,
            }
        },
        "eval_result_details": [{"first_letter": "b"}, {"first_letter": "a"}],
    }
    s = A.summary(rec)
    assert s["letters"] == ["a", "b"] and s["mean_full_absorption_score"] == 0.05
    assert A.summary(None) is None
