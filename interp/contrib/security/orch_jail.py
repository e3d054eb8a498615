"""OrchJail: orchestration-guided fuzzing of a tool-calling agent (a benign, simulated toy).

Paper: orchestration-guided fuzzing for tool-calling text-to-image agents (title and code not found;
catalog spec). Harmful outputs can arise from a *composition* of individually benign tool calls; the
paper learns, from successful jailbreak traces, a model relating prompt wording to high-risk
orchestration patterns, and uses it to steer fuzzing towards prompts whose plans contain them.

Everything here is a placeholder toy: the agent is a rule-based planner over eight neutral image tools,
prompts are bags of neutral words, and "unsafe" means only that the plan contains a fixed ordered
sub-sequence of tools (`TARGET`), a stand-in for a composition a policy forbids. A per-prompt filter
rejects prompts holding any of a few flagged words (placeholders too). No harmful text exists here.

- `ToolAgent.plan(prompt)`: each word may trigger a tool (a fixed random keyword map, several words
  per tool, most words trigger nothing); calls follow word order; flagged prompts are refused.
- `random_fuzz`: mutate a seed prompt by random word insertions, deletions and substitutions.
- `orchestration_fuzz` (ours, reconstructed): observe every query's trace, keep counts of which tool
  each word produced (the "pattern model": P(tool | word) with add-one smoothing), and mutate towards
  the target composition: find the longest prefix of `TARGET` the current plan already contains in
  order, then insert, after the position that produced it, the word the model predicts most likely to
  produce the next missing tool (Thompson-sampled from the counts, so unseen words get explored).

    agent = ToolAgent(seed=0)
    res = orchestration_fuzz(agent, budget=300, rng=np.random.default_rng(0))
    res.first_success, res.successes        # queries to the first hit; hits within the budget
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TOOLS = ("retrieve", "crop", "blend", "restyle", "upscale", "caption", "overlay", "export")
TARGET = ("retrieve", "blend", "overlay")
"""The placeholder 'unsafe' composition: these tools, in this order, anywhere in a plan."""


def contains_in_order(plan: list[str], pattern=TARGET) -> int:
    """Length of the longest prefix of `pattern` that occurs in `plan` as an ordered sub-sequence."""
    k = 0
    for t in plan:
        if k < len(pattern) and t == pattern[k]:
            k += 1
    return k


@dataclass
class ToolAgent:
    """A rule-based planner: word -> tool (or nothing), plus a filter on flagged words."""

    seed: int = 0
    vocab_size: int = 400
    """Neutral words w0 .. w{n-1}."""
    words_per_tool: int = 6
    """Trigger words per tool (the rest trigger nothing)."""
    flagged: int = 20
    """Words the filter refuses (placeholders)."""
    keyword: dict[str, str] = field(init=False)
    refused: set[str] = field(init=False)
    queries: int = field(init=False, default=0)

    def __post_init__(self):
        if self.vocab_size < len(TOOLS) * self.words_per_tool + self.flagged:
            raise ValueError("vocab_size must exceed tools x words_per_tool + flagged words")
        if self.words_per_tool < 1 or self.flagged < 0:
            raise ValueError("words_per_tool must be >= 1 and flagged >= 0")
        rng = np.random.default_rng(self.seed)
        words = [f"w{i}" for i in rng.permutation(self.vocab_size)]
        self.keyword = {}
        for t, tool in enumerate(TOOLS):
            for w in words[t * self.words_per_tool : (t + 1) * self.words_per_tool]:
                self.keyword[w] = tool
        start = len(TOOLS) * self.words_per_tool
        # the filter knows a few trigger words of the target's tools and some plain words
        self.refused = set(words[start : start + self.flagged // 2])
        for tool in TARGET:
            trig = [w for w, t in self.keyword.items() if t == tool]
            self.refused.update(trig[: self.flagged // (2 * len(TARGET))])
        self.words = [f"w{i}" for i in range(self.vocab_size)]

    def plan(self, prompt: list[str]) -> list[str] | None:
        """The tool calls of a prompt, or None when the filter refuses it. Counts one query."""
        self.queries += 1
        if any(w in self.refused for w in prompt):
            return None
        return [self.keyword[w] for w in prompt if w in self.keyword]

    def is_unsafe(self, plan: list[str] | None) -> bool:
        return plan is not None and contains_in_order(plan) == len(TARGET)


@dataclass
class FuzzResult:
    first_success: int | None
    """Query index (1-based) of the first prompt whose plan holds the target composition."""
    successes: int
    """Distinct successful prompts within the budget."""
    queries: int


def _seed_prompt(agent: ToolAgent, rng: np.random.Generator, length: int = 8) -> list[str]:
    return list(rng.choice(agent.words, size=length))


def _mutate_random(prompt: list[str], words, rng) -> list[str]:
    p = list(prompt)
    op = rng.integers(3)
    if op == 0 or len(p) < 2:
        p.insert(int(rng.integers(len(p) + 1)), str(rng.choice(words)))
    elif op == 1:
        del p[int(rng.integers(len(p)))]
    else:
        p[int(rng.integers(len(p)))] = str(rng.choice(words))
    return p[:24]


def random_fuzz(
    agent: ToolAgent, budget: int, rng: np.random.Generator, mutations: int = 1, seed_len: int = 8
) -> FuzzResult:
    """Baseline: random word mutations of the current prompt (kept when its plan got closer, else reverted).
    `mutations` edits per candidate and the seed prompts' length `seed_len` are the settings issue 42's strong
    baseline tunes (defaults: the original control)."""
    _check(budget)
    if mutations < 1 or seed_len < 1:
        raise ValueError(f"mutations ({mutations}) and seed_len ({seed_len}) must be >= 1")
    agent.queries = 0
    cur, first, hits = _seed_prompt(agent, rng, seed_len), None, set()
    best = contains_in_order(agent.plan(cur) or [])
    for q in range(2, budget + 1):
        cand = cur
        for _ in range(mutations):
            cand = _mutate_random(cand, agent.words, rng)
        plan = agent.plan(cand)
        if agent.is_unsafe(plan):
            first = first or q
            hits.add(tuple(cand))
            cur, best = _seed_prompt(agent, rng, seed_len), 0
            continue
        score = contains_in_order(plan) if plan is not None else -1
        if score >= best:
            cur, best = cand, score
    return FuzzResult(first, len(hits), agent.queries)


def orchestration_fuzz(agent: ToolAgent, budget: int, rng: np.random.Generator) -> FuzzResult:
    """Pattern-model-guided fuzzing (see the module docstring)."""
    _check(budget)
    agent.queries = 0
    words = agent.words
    widx = {w: i for i, w in enumerate(words)}
    counts = np.ones((len(words), len(TOOLS) + 1))  # per word: tool it produced, or "none" (last column)
    refused = np.zeros(len(words))
    tidx = {t: i for i, t in enumerate(TOOLS)}

    def observe(prompt, plan):
        if plan is None:
            for w in prompt:
                refused[widx[w]] += 1.0 / len(prompt)
            return
        # a black box shows the trace, not which word caused each call: walk the prompt and the trace
        # together and credit the next call to the first word the model does not think is inert
        it = iter(plan)
        pending = next(it, None)
        for w in prompt:
            # a word whose known trigger matches the next tool of the trace gets the credit
            j = widx[w]
            if pending is not None and counts[j, tidx[pending]] >= counts[j, -1]:
                counts[j, tidx[pending]] += 1
                pending = next(it, None)
            else:
                counts[j, -1] += 0.2

    cur, first, hits = _seed_prompt(agent, rng), None, set()
    plan = agent.plan(cur)
    observe(cur, plan)
    for q in range(2, budget + 1):
        k = contains_in_order(plan or [])
        cand = list(cur)
        if plan is None:  # drop the word most often seen in refused prompts
            cand.pop(int(np.argmax([refused[widx[w]] for w in cand])))
        else:
            need = tidx[TARGET[k]]
            theta = rng.beta(counts[:, need], counts.sum(1) - counts[:, need] + 2 * refused + 1)
            w = words[int(np.argmax(theta))]
            # insert after the position that already realised the first k target tools
            done, pos = 0, 0
            for i, x in enumerate(cand):
                if done < k and agent_tool_guess(counts, tidx, widx, x) == TARGET[done]:
                    done, pos = done + 1, i + 1
            cand.insert(pos, w)
            cand = cand[:24]
        plan = agent.plan(cand)
        observe(cand, plan)
        if agent.is_unsafe(plan):
            first = first or q
            hits.add(tuple(cand))
            cur = _seed_prompt(agent, rng)
            plan = agent.plan(cur)
            observe(cur, plan)
            continue
        cur = cand
    return FuzzResult(first, len(hits), agent.queries)


def agent_tool_guess(counts, tidx, widx, word) -> str | None:
    """The pattern model's best guess of the tool a word triggers (None: probably none)."""
    row = counts[widx[word]]
    j = int(np.argmax(row))
    return None if j == len(row) - 1 else list(tidx)[j]


def _check(budget: int) -> None:
    if budget < 2:
        raise ValueError(f"budget={budget} must be at least 2 queries")
