"""Build a dashboard folder from a source of activations: one pass, then pages, JSON and the index.

    out/index.html                       sortable/filterable table of every feature, header, density histogram
    out/features/<i>.html                one page per chosen feature (links to neighbours and the index)
    out/features/<i>.json                the page's data (our record, `interp.dashboards.features`)
    out/features/<i>.neuronpedia.json    the same in SAEDashboard/Neuronpedia's structure (`export.py`)
    out/neuronpedia_batch.json           all exported features in a `NeuronpediaDashboardBatch`
    out/dashboard.json                   header numbers and settings (rows rule, FVU, L0, counts)

>>> src = StoreSource(store, hook, encode=sae.encode, decode=sae.decode, row_filter=filt)
>>> build_dashboard(src, "runs/dash", n_features=sae.cfg.d_sae, vocab=Vocab(tok), top=100)
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.dashboards.export import neuronpedia_batch, to_neuronpedia
from interp.dashboards.features import ContextFetcher, decoder_neighbours, feature_order, feature_record
from interp.dashboards.index import index_html
from interp.dashboards.logits import logit_effects
from interp.dashboards.page import FeaturePage, feature_fragment, page_html
from interp.dashboards.stats import FeatureStats, StatsConfig
from interp.dashboards.tokens import Vocab
from interp.store.atomic import atomic_write_bytes


@dataclass
class DashboardConfig:
    """Which features get a page and what each page shows."""

    features: list[int] | None = None
    """Features with a page (overrides `top`/`order` for the pages; the index still lists all)."""
    top: int = 50
    """Pages for the first `top` features in `order`."""
    order: str = "interpretable"
    """interpretable (live, not dense, by max activation; then dense; then dead), max, freq, mean or index."""
    dense: float = 0.1
    """Firing frequency above which a feature is dense."""
    n_groups: int = 5
    """Quantile buckets per page."""
    per_group: int = 4
    """Examples per bucket."""
    n_coact: int = 8
    """Co-activating features listed."""
    n_neighbours: int = 8
    """Decoder-cosine neighbours listed."""
    n_logits: int = 10
    """Promoted / suppressed tokens listed."""
    title: str = "Feature dashboard"
    stats: StatsConfig = field(default_factory=StatsConfig)

    def __post_init__(self) -> None:
        from interp.dashboards.features import ORDERS

        if self.order not in ORDERS:
            raise ValueError(f"--order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.top < 0:
            raise ValueError(f"--top must be >= 0, got {self.top}")
        if not 0 < self.dense <= 1:
            raise ValueError(f"dense threshold must be in (0, 1], got {self.dense}")


def check_features(features: list[int] | None, n_features: int) -> None:
    """A clear error for feature indices that do not exist (before any work is done)."""
    if features is None:
        return
    if not features:
        raise ValueError("--features is empty: give indices such as 12,345")
    bad = [f for f in features if not 0 <= f < n_features]
    if bad:
        raise ValueError(
            f"--features {','.join(map(str, bad[:5]))} out of range: there are {n_features} features "
            f"(0..{n_features - 1})"
        )


def parse_features(text: str | None) -> list[int] | None:
    """ "12,345" -> [12, 345]; None stays None."""
    if text is None:
        return None
    try:
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise ValueError(f"--features takes comma-separated integers such as 12,345, got {text!r}") from None


def collect(source: Any, n_features: int, cfg: StatsConfig | None = None, progress: bool | None = None) -> FeatureStats:
    """The one pass over the source's chunks."""
    from interp.infra.logs import progress as progress_bar

    stats = FeatureStats(n_features, cfg)
    limit = getattr(source, "max_kept", None)  # then the total counts ordinary rows, and so does the bar
    with progress_bar(total=source.n_rows, unit="row", desc="dashboard pass", enabled=progress is not False) as bar:
        for ch in source.chunks():
            stats.update(ch.z, ch.rows, ch.seq, ch.pos, ch.keep)
            kept = len(ch.rows) if limit is None or ch.keep is None else int(ch.keep.sum())
            bar.update(min(kept, source.n_rows - bar.n))
    if stats.n_rows == 0:
        raise ValueError("no rows to build a dashboard from (the store is empty or the row rule excluded every row)")
    return stats


def records(
    stats: FeatureStats,
    source: Any,
    vocab: Vocab,
    features: list[int],
    cfg: DashboardConfig,
    directions: Tensor | None = None,
    unembedding: tuple[Tensor, Tensor | None] | None = None,
    names: dict[int, str] | None = None,
) -> dict[int, dict[str, Any]]:
    """Records of `features` (contexts fetched in one batch)."""
    sc = stats.cfg
    fetch = ContextFetcher(source, sc.before, sc.after)
    fs = torch.tensor(features, dtype=torch.long)
    rows = torch.cat([tr.row[fs].flatten() for tr in (stats.top, stats.sample, stats.bottom) if tr is not None])
    fetch.prefetch(rows[rows >= 0].tolist())
    nb = decoder_neighbours(directions, features, cfg.n_neighbours) if directions is not None else {}
    lg = {}
    if unembedding is not None and directions is not None:
        lg = logit_effects(directions, unembedding[0], unembedding[1], features, cfg.n_logits)
    return {
        f: feature_record(
            stats,
            f,
            fetch,
            vocab,
            name=(names or {}).get(f),
            n_top=sc.n_top,
            n_groups=cfg.n_groups,
            per_group=cfg.per_group,
            n_coact=cfg.n_coact,
            dense=cfg.dense,
            neighbours=nb.get(f),
            logits=lg.get(f),
        )
        for f in features
    }


def index_rows(
    stats: FeatureStats,
    source: Any,
    vocab: Vocab,
    order: list[int],
    pages: set[int],
    dense: float,
    names: dict[int, str] | None = None,
    n_toks: int = 5,
    spark_bins: int = 16,
) -> list[dict[str, Any]]:
    """One row per feature for the index table, in `order`."""
    from interp.dashboards.features import density_class

    centre = ContextFetcher(source, 0, 0)
    rows = stats.top.row
    centre.prefetch(rows[rows >= 0].tolist())
    top_rows = rows.tolist()
    out = []
    for f in order:
        toks: list[str] = []
        for r in top_rows[f]:
            if r < 0:
                break
            s = vocab.show(centre._cache[r][0])
            if s not in toks:
                toks.append(s)
            if len(toks) == n_toks:
                break
        _, counts = stats.hist.trimmed(f)
        k = max(1, -(-len(counts) // spark_bins))
        spark = [int(counts[i : i + k].sum()) for i in range(0, len(counts), k)]
        freq = float(stats.freq[f])
        out.append(
            {
                "f": f,
                "name": (names or {}).get(f, f"feature {f}"),
                "cls": density_class(freq, dense),
                "freq": freq,
                "max": round(float(stats.max_value[f]), 5),
                "mean": round(float(stats.mean_active[f]), 5),
                "toks": toks,
                "spark": spark,
                "page": f"features/{f}.html" if f in pages else "",
            }
        )
    return out


def header(stats: FeatureStats, source: Any, dense: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Header numbers: rows covered and the rule, features, dead/dense counts, L0 and FVU (when the source
    reconstructs)."""
    freq = stats.freq
    h: dict[str, Any] = dict(extra or {})
    h["rows covered"] = f"{stats.n_rows:,} ordinary rows ({getattr(source, 'n_special', 0):,} special rows left out)"
    h["features"] = f"{stats.n_features:,}"
    h["dead"] = f"{int((freq == 0).sum()):,} ({100 * float((freq == 0).double().mean()):.3g}%)"
    h[f"dense (> {100 * dense:g}%)"] = (
        f"{int((freq > dense).sum()):,} ({100 * float((freq > dense).double().mean()):.3g}%)"
    )
    h["mean L0"] = f"{stats.l0_sum / max(stats.n_rows, 1):.4g}"
    rec = getattr(source, "recon", None)
    if rec is not None and rec.n:
        r = rec.result()
        h["FVU"] = f"{round(r['fvu'], 4)}"
        h["L0 (encoder)"] = f"{round(r['l0'], 4)}"
    h["signed values"] = "yes (nothing clamped; 'fires' = value > 0)" if stats.signed else "no"
    return h


def write_folder(
    out: str | Path,
    stats: FeatureStats,
    source: Any,
    vocab: Vocab,
    cfg: DashboardConfig,
    directions: Tensor | None = None,
    unembedding: tuple[Tensor, Tensor | None] | None = None,
    names: dict[int, str] | None = None,
    head: dict[str, Any] | None = None,
    export_meta: dict[str, Any] | None = None,
    overwrite: bool = True,
    ablation: Any = None,
) -> Path:
    """Pages, JSON and index for `stats` into the folder `out`; returns `out/index.html`. `ablation`: a
    `WindowAblation` (needs the model) that adds each top window's per-token ablation effects to the pages."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; a dashboard is a folder (give a folder path)")
    check_features(cfg.features, stats.n_features)
    order = feature_order(stats, cfg.order, cfg.dense)
    pages = list(cfg.features) if cfg.features is not None else order[: cfg.top]
    recs = records(stats, source, vocab, pages, cfg, directions, unembedding, names)
    if ablation is not None:
        from interp.infra.logs import progress as progress_bar

        with progress_bar(total=len(recs), unit="page", desc="ablation effects") as bar:
            for rec in recs.values():
                ablation.annotate(rec, source)
                bar.update(1)
    hdr = header(stats, source, cfg.dense, head)
    meta = export_meta or {}
    out.mkdir(parents=True, exist_ok=True)
    feat_dir = out / ".features.partial"  # filled, then renamed over features/ (one rename, no fsync per page)
    if feat_dir.exists():
        shutil.rmtree(feat_dir)  # a killed run's leftover
    feat_dir.mkdir()
    try:
        exported = _write_pages(feat_dir, recs, hdr, stats, pages, cfg, meta)
    except BaseException:
        shutil.rmtree(feat_dir, ignore_errors=True)  # disk full, a bad record: no half-written folder left
        raise
    page_set = set(pages)
    final = out / "features"
    if final.exists():
        if not overwrite:
            raise FileExistsError(f"{final} exists; pass overwrite=True to replace it")
        shutil.rmtree(final)
    feat_dir.rename(final)
    batch = neuronpedia_batch(
        exported, str(meta.get("model_id", "")), int(meta.get("layer", 0)), str(meta.get("sae_set", ""))
    )
    atomic_write_bytes(out / "neuronpedia_batch.json", json.dumps(batch).encode())
    rows = index_rows(stats, source, vocab, order, page_set, cfg.dense, names)
    atomic_write_bytes(out / "index.html", index_html(rows, hdr, cfg.title).encode())
    summary = {
        "header": hdr,
        "pages": pages,
        "config": {**asdict(cfg), "stats": asdict(stats.cfg)},
        "recon": getattr(getattr(source, "recon", None), "result", dict)(),
    }
    atomic_write_bytes(out / "dashboard.json", json.dumps(summary, indent=1, default=str).encode())
    return out / "index.html"


def _write_pages(
    feat_dir: Path,
    recs: dict[int, dict[str, Any]],
    hdr: dict[str, Any],
    stats: FeatureStats,
    pages: list[int],
    cfg: DashboardConfig,
    meta: dict[str, Any],
) -> list[dict[str, Any]]:
    """Each page's HTML, JSON and Neuronpedia JSON into `feat_dir`; returns the Neuronpedia records."""
    page_set = set(pages)
    link = lambda g: f"{g}.html" if g in page_set else None  # noqa: E731
    rule = str(hdr.get("rows rule", ""))
    note = f"Statistics over {stats.n_rows:,} tokens" + (f"; special rows excluded by rule {rule}" if rule else "")
    exported = []
    for f, rec in recs.items():
        frag = feature_fragment(rec, link=link, header=note, index_href="../index.html")
        (feat_dir / f"{f}.html").write_text(page_html(frag, f"{rec['name']} · {cfg.title}"), encoding="utf-8")
        (feat_dir / f"{f}.json").write_text(json.dumps(rec), encoding="utf-8")
        np_rec = to_neuronpedia(rec, ctx_len=int(meta.get("ctx_len", 0)), dataset=str(meta.get("dataset", "")))
        (feat_dir / f"{f}.neuronpedia.json").write_text(json.dumps(np_rec), encoding="utf-8")
        exported.append(np_rec)
    return exported


def build_dashboard(
    source: Any,
    out: str | Path,
    n_features: int,
    vocab: Vocab | None = None,
    cfg: DashboardConfig | None = None,
    **kwargs: Any,
) -> Path:
    """Pass over `source`, then write the folder `out` (see the module docstring). Returns the index path."""
    cfg = cfg or DashboardConfig()
    check_features(cfg.features, n_features)
    stats = collect(source, n_features, cfg.stats, kwargs.pop("progress", None))
    return write_folder(out, stats, source, vocab or Vocab(), cfg, **kwargs)


def write_dashboard(
    out: str | Path,
    acts: Tensor,
    rows: Any,
    features: list[int] | None = None,
    names: dict[int, str] | None = None,
    title: str = "Feature dashboard",
    max_features: int = 50,
    tokenizer: Any = None,
) -> Path:
    """Dashboard of activations in memory: `acts` [n, F] over `rows` (a `TokenRows`). Writes the folder
    `out` and returns its index.html."""
    from interp.dashboards.source import TensorSource

    src = TensorSource(acts.detach().float().cpu(), rows.token_ids, rows.seq, rows.pos)
    cfg = DashboardConfig(features=features, top=max_features, title=title)
    return build_dashboard(src, out, acts.shape[1], rows.vocab(tokenizer), cfg, names=names, progress=False)


def feature_page(
    stats: FeatureStats,
    source: Any,
    f: int,
    vocab: Vocab | None = None,
    cfg: DashboardConfig | None = None,
    directions: Tensor | None = None,
    unembedding: tuple[Tensor, Tensor | None] | None = None,
    header: str = "",
) -> FeaturePage:
    """One feature's page as an object that shows itself in Jupyter (`_repr_html_`)."""
    cfg = cfg or DashboardConfig()
    check_features([f], stats.n_features)
    rec = records(stats, source, vocab or Vocab(), [f], cfg, directions, unembedding)[f]
    return FeaturePage(rec, header or f"Statistics over {stats.n_rows:,} tokens")
