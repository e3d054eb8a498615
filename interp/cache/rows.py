"""The one rule for special rows (attention sinks, BOS, massive-activation tokens) used everywhere.

Why: in SmolLM2 the position-0 rows of the residual stream have ~81x the mean norm at layer 15
(NOTES.md). Such a row dominates any pool it enters: a BatchTopK batch gives it hundreds of latents, a
mean-squared error is mostly its error, a dashboard's top activations are all position 0. Every consumer
of store rows (SAE training, `interp sae eval`, every SAE metric, the spliced-loss metrics, dashboards,
hardening checks) must therefore drop the *same* rows, and record which rule it applied.

Spec strings (combine with ``+``; order and repeats do not matter)::

    none                   keep every row
    bos                    the first position of each sequence (alias of positions:0: it holds BOS when the
                           tokenizer adds one and is the attention sink either way)
    positions:0,1          rows at these positions within their sequence
    norm-outliers:10       rows whose norm exceeds 10x the *reference norm*: the median row norm over a fixed,
                           evenly spaced sample of the store (rows at excluded positions left out). A median,
                           not a mean, because the outliers themselves inflate a mean (1 row in 128 at 81x
                           raises it by ~60%); a fixed reference, not the batch's, so a row's fate never
                           depends on the batch or chunk it is read in.

DEFAULT (stated once here; README and CLIs point at it): ``positions:0+norm-outliers:10``. Position 0 is
the attention sink of SmolLM2 (and of most causal LMs); ``norm-outliers:10`` also catches the later
massive-activation tokens, without touching ordinary rows. Measured on SmolLM2-135M
``blocks.15.hook_resid_post`` over 131,072 tokens of ``usr-share-doc`` (the first 4 shards of the real-run
store; that text varies with the machine's installed packages, so these figures are that machine's): median
row norm 180; position-0 rows 98-132x the median; of the 130,048 other rows 99.9% lie below 1.35x and 11
(0.008%) above 10x, up to 164x. (The mean row norm, 366, is twice the median because of the position-0 rows:
a mean-based cut moves with the share of sinks in the sample.)

API (small and stable; other packages depend on it)::

    rule = RowRule.parse("positions:0+norm-outliers:10")    # ValueError naming the fix on bad specs
    rule.spec                                               # canonical string, e.g. "positions:0+norm-outliers:10"
    filt = rule.bind(store, hook)                           # fixes the reference norm (one read of the store)
    keep = filt.keep(batch)                                 # bool [n]; batch = store.get_rows/iter_batches dict
    keep = filt.keep_tensor(x, pos)                         # the same for tensors you hold (pos may be None)
    filt.config()                                           # {"exclude": spec, "reference_norm": ..., "hook": ...}
    RowFilter.from_config(cfg)                              # the same filter again, from an artifact's config

Every artifact that filtered rows records ``filt.config()`` (key ``rows``) so a later reader applies the
identical rule with the identical reference norm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

DEFAULT_EXCLUDE = "positions:0+norm-outliers:10"
"""The toolkit's default row rule (see the module docstring for why)."""

REFERENCE_SAMPLE = 8192
"""Rows in the evenly spaced store sample whose median norm is the reference norm."""

_HELP = "use none, bos, positions:0,1 or norm-outliers:10, combined with '+', e.g. positions:0+norm-outliers:10"


@dataclass(frozen=True)
class RowRule:
    """Which rows are special (excluded from SAE pools, metrics and dashboards)."""

    positions: tuple[int, ...] = ()
    """Sequence positions whose rows are excluded (sorted, unique, >= 0)."""
    norm_multiple: float | None = None
    """Exclude rows whose norm exceeds this multiple of the reference norm; None: no norm cut."""

    def __post_init__(self) -> None:
        if any(p < 0 for p in self.positions):
            raise ValueError(f"row positions must be >= 0, got {list(self.positions)}")
        if tuple(sorted(set(self.positions))) != self.positions:
            object.__setattr__(self, "positions", tuple(sorted(set(self.positions))))
        if self.norm_multiple is not None and not self.norm_multiple > 0:
            raise ValueError(f"norm-outliers needs a positive multiple, got {self.norm_multiple}")

    @classmethod
    def parse(cls, spec: str | RowRule | None) -> RowRule:
        """Parse a spec string (None: the default). Raises ValueError with the accepted forms."""
        if isinstance(spec, RowRule):
            return spec
        spec = DEFAULT_EXCLUDE if spec is None else str(spec).strip().lower()
        if not spec:
            raise ValueError(f"empty row rule: {_HELP}")
        positions: set[int] = set()
        multiple: float | None = None
        for part in spec.split("+"):
            part = part.strip()
            name, _, arg = part.partition(":")
            try:
                if name == "none" and not arg:
                    continue
                if name == "bos" and not arg:
                    positions.add(0)
                elif name == "positions" and arg:
                    positions.update(int(p) for p in arg.split(","))
                elif name == "norm-outliers" and arg:
                    m = float(arg)
                    multiple = m if multiple is None else min(multiple, m)
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(f"bad row rule part {part!r} in {spec!r}: {_HELP}") from None
        if "none" in spec.split("+") and (positions or multiple is not None):
            raise ValueError(f"row rule {spec!r} combines none with other parts: {_HELP}")
        return cls(tuple(sorted(positions)), multiple)

    @property
    def spec(self) -> str:
        """Canonical spec string (what artifacts record); parses back to an equal rule."""
        parts = []
        if self.positions:
            parts.append("positions:" + ",".join(str(p) for p in self.positions))
        if self.norm_multiple is not None:
            parts.append(f"norm-outliers:{self.norm_multiple:g}")
        return "+".join(parts) or "none"

    def __str__(self) -> str:
        return self.spec

    def position_keep(self, pos: Tensor | None) -> Tensor | None:
        """Bool mask of rows not at an excluded position (None when pos is None)."""
        if pos is None:
            return None
        keep = torch.ones(pos.shape, dtype=torch.bool, device=pos.device)
        for p in self.positions:
            keep &= pos != p
        return keep

    def bind(self, store: Any, hook: str, reference_norm: float | None = None) -> RowFilter:
        """A filter for `hook` of `store`, with the reference norm measured on the store (or given).

        A store whose rows are not token sequences (ctx_len 1, e.g. synthetic data) has no positions:
        the position parts are dropped there, and the filter's spec (what gets recorded) says so."""
        if self.positions and getattr(getattr(store, "meta", None), "ctx_len", None) == 1:
            return RowRule((), self.norm_multiple).bind(store, hook, reference_norm)
        if reference_norm is None and self.norm_multiple is not None:
            reference_norm = store_reference_norm(store, hook, self)
        return RowFilter(self, reference_norm, hook)

    def bind_tensor(self, x: Tensor, pos: Tensor | None = None) -> RowFilter:
        """A filter whose reference norm is the median norm of these rows (for data not in a store)."""
        ref = None
        if self.norm_multiple is not None:
            ref = reference_norm_of(x, self.position_keep(pos))
        return RowFilter(self, ref, None)


def reference_norm_of(x: Tensor, keep: Tensor | None = None) -> float:
    """Median row norm of `x` (rows where `keep` is True)."""
    n = x.float().norm(dim=-1)
    if keep is not None:
        n = n[keep]
    n = n[torch.isfinite(n)]  # damaged rows are reported by the readers, not silently part of the reference
    if n.numel() == 0:
        raise ValueError(
            "no finite rows left to measure a reference norm on: the position rule excludes every row "
            "(use --exclude none or norm-outliers:10 for rows that are not token sequences)"
        )
    return float(n.median())


def store_reference_norm(store: Any, hook: str, rule: RowRule, n_rows: int = REFERENCE_SAMPLE) -> float:
    """Median norm of `hook` over `n_rows` evenly spaced rows of the store (rows at excluded positions out)."""
    total = len(store)
    if total == 0:
        raise ValueError(f"the store {getattr(store, 'path', '')} has no rows")
    idx = torch.linspace(0, total - 1, min(n_rows, total)).round().long().unique()
    rows = store.get_rows(idx, hooks=hook)
    return reference_norm_of(rows[hook], rule.position_keep(rows.get("pos")))


@dataclass(frozen=True)
class RowFilter:
    """A `RowRule` with its reference norm fixed: a row's keep/drop never depends on its batch."""

    rule: RowRule
    """The rule."""
    reference_norm: float | None
    """Median row norm the norm cut is a multiple of (None when the rule has no norm cut)."""
    hook: str | None = None
    """The hook whose rows this filter reads (None for tensors)."""

    def __post_init__(self) -> None:
        if self.rule.norm_multiple is not None and self.reference_norm is None:
            raise ValueError(f"row rule {self.rule.spec} needs a reference norm: use rule.bind(store, hook)")

    @property
    def spec(self) -> str:
        return self.rule.spec

    @property
    def cut(self) -> float | None:
        """Norm above which a row is dropped (None: no norm cut)."""
        if self.rule.norm_multiple is None:
            return None
        return self.rule.norm_multiple * float(self.reference_norm)

    def keep_tensor(self, x: Tensor | None, pos: Tensor | None = None) -> Tensor:
        """Bool [n] mask of ordinary rows of `x` ([n, d]) at positions `pos` ([n] or None)."""
        if x is None and pos is None:
            raise ValueError("keep_tensor needs rows or positions")
        n = x.shape[0] if x is not None else pos.shape[0]
        keep = torch.ones(n, dtype=torch.bool, device=(x if x is not None else pos).device)
        if self.rule.positions:
            if pos is None:
                raise ValueError(f"row rule {self.spec} excludes positions, but no positions were given")
            keep &= self.rule.position_keep(pos.reshape(-1))
        if self.cut is not None:
            if x is None:
                raise ValueError(f"row rule {self.spec} cuts on norms, but no rows were given")
            keep &= x.float().norm(dim=-1) <= self.cut
        return keep

    def keep(self, batch: dict[str, Tensor]) -> Tensor:
        """Bool mask for a batch dict as returned by `store.get_rows` / `store.iter_batches`."""
        x = batch.get(self.hook) if self.hook is not None else None
        if x is None and self.cut is not None:
            raise ValueError(f"the batch has no {self.hook!r} rows to apply {self.spec} to")
        return self.keep_tensor(x, batch.get("pos"))

    def config(self) -> dict[str, Any]:
        """What an artifact records (key ``rows``): the canonical spec, the reference norm and the hook."""
        return {"exclude": self.spec, "reference_norm": self.reference_norm, "hook": self.hook}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> RowFilter:
        """The filter an artifact recorded with `config()`."""
        return cls(RowRule.parse(cfg["exclude"]), cfg.get("reference_norm"), cfg.get("hook"))


def row_filter(spec: str | RowRule | None, store: Any, hook: str, recorded: dict[str, Any] | None = None) -> RowFilter:
    """The filter for `spec` on `store`/`hook`; reuses a recorded reference norm when the spec matches
    (so eval and dashboards apply exactly the filter training used)."""
    rule = RowRule.parse(spec)
    if recorded and recorded.get("exclude") == rule.spec and recorded.get("hook") in (None, hook):
        return RowFilter(rule, recorded.get("reference_norm"), hook)
    return rule.bind(store, hook)
