"""Dashboards of SAE latents: the SAE's encoder over store rows, through `interp.dashboards`.

The rows are the ones `interp sae eval` scores (the held-out shards when training kept some, the first
`max_rows` of them, the shared special-row rule), so the FVU and L0 in the index header equal
`sae eval`'s for the same SAE and options. Decoder directions give the cosine neighbours; the
unembedding, read from the weights file without the model, gives logit effects.

    interp sae dashboard --sae runs/sae/c2r --store runs/sae/store_l15 --out runs/sae/c2r/dashboard
    >>> from sae.dashboard import feature_page
    >>> feature_page("runs/sae/c2r", 12)          # shows inline in Jupyter (store from train_config.json)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass
class SaeRows:
    """An SAE, its store, hook, the rows to read and the row filter: everything a dashboard pass needs."""

    sae: Any
    store: Any
    hook: str
    rows: torch.Tensor
    split: str
    row_filter: Any
    sae_dir: str | None = None
    max_rows: int | None = None
    """Ordinary rows to cover (the first ones of `rows`), as `interp sae eval --max-rows`."""

    def source(self) -> Any:
        from interp.dashboards import StoreSource
        from sae import metrics as M

        return StoreSource(
            self.store,
            self.hook,
            rows=self.rows,
            encode=lambda x: M.encode(self.sae, x),
            decode=lambda z: self.sae.decode(z),
            row_filter=self.row_filter,
            max_kept=self.max_rows,
        )

    def arch(self) -> str:
        """The architecture it was trained as, and the inference form when that differs (BatchTopK -> JumpReLU)."""
        from sae import arch_name

        shipped = arch_name(self.sae)
        cfg = Path(self.sae_dir) / "train_config.json" if self.sae_dir else None
        trained = json.loads(cfg.read_text()).get("arch") if cfg is not None and cfg.is_file() else None
        return f"{trained}, codes as {shipped}" if trained and trained != shipped else shipped

    def header(self) -> dict[str, str]:
        spec = self.row_filter.spec if self.row_filter is not None else "none"
        return {
            "SAE": f"{self.sae_dir or '(in memory)'} ({self.arch()}, d_sae {self.sae.cfg.d_sae})",
            "store": str(self.store.path),
            "hook": self.hook,
            "split": self.split,
            "rows rule": spec,
        }


def sae_rows(
    sae: Any, store: Any = None, max_rows: int = 32_768, exclude: str | None = None, split: str = "auto"
) -> SaeRows:
    """Resolve an SAE (folder or loaded; inference codes as shipped) and its store (folder, opened, or the
    one its train_config.json names), with the rows and the row filter `interp sae eval` would use."""
    from interp.store import ActivationStore
    from sae import load_sae
    from sae.evaluate import eval_rows, sae_hook, sae_row_filter
    from sae.store_rows import check_shapes as _check_shapes

    sae_dir = None
    if isinstance(sae, (str, Path)):
        sae_dir = str(sae)
        if store is None:
            cfg = Path(sae) / "train_config.json"
            store = json.loads(cfg.read_text()).get("store") if cfg.is_file() else None
            if not store:
                raise ValueError(f"{sae} does not name its store (no train_config.json): pass store=...")
            from interp.infra.portable import resolve_recorded

            store = resolve_recorded(store, sae)  # recorded relative to the SAE's folder
        sae = load_sae(sae)
    if store is None:
        raise ValueError("pass store=... (the ActivationStore the SAE reads)")
    st = store if hasattr(store, "get_rows") else ActivationStore.open(store)
    if max_rows < 1:
        raise ValueError(f"--max-rows must be >= 1, got {max_rows}")
    h = sae_hook(sae, st)  # the model and hook its cfg records (another one is refused)
    _check_shapes(st, h, sae.cfg.d_in)
    used, rows = eval_rows(sae_dir, st, split)
    filt = sae_row_filter(sae_dir, st, h, exclude)
    return SaeRows(sae, st, h, rows, used, None if filt.spec == "none" else filt, sae_dir, max_rows)


def render_sae_dashboard(
    sae_dir: str,
    store_dir: str | None,
    out: str,
    model_spec: str | None = None,
    n_features: int = 50,
    max_rows: int = 32_768,
    features: list[int] | None = None,
    order: str = "interpretable",
    exclude: str | None = None,
    text: str | None = None,
    overwrite: bool = True,
    split: str = "auto",
    ablate_windows: int = 20,
) -> Path:
    """Encode store rows with the SAE and write its dashboard folder; returns out/index.html.

    With `model_spec` given, the model is loaded and the first `ablate_windows` top windows of each page get
    per-token ablation effects on hover (`latent_ablation`); without it, pages show activations only."""
    from interp.cli.dashboard import _tokenizer
    from interp.dashboards import DashboardConfig, check_features
    from interp.dashboards.logits import load_unembedding

    sr = sae_rows(sae_dir, store_dir, max_rows, exclude, split)
    if model_spec:  # the SAE records its model: another one is refused before any model is read
        from interp.infra.sae_folder import check_trained_model

        check_trained_model(sr.sae, model_spec, "--model", ", or leave --model out (the store's model)")
    d_sae = sr.sae.cfg.d_sae
    check_features(features, d_sae)
    cfg = DashboardConfig(
        features=features,
        top=n_features,
        order=order,
        title=f"{sr.arch().split(',')[0]} SAE on {sr.hook} ({sr.store.meta.model})",
    )
    spec = model_spec or (sr.store.meta.model if sr.store.meta.model != "synthetic" else None)
    tok = _tokenizer(spec) if spec else None
    unembed = None
    if spec:
        try:
            unembed = load_unembedding(spec)
        except Exception as exc:  # noqa: BLE001 - pages still work without logit effects
            import logging

            logging.getLogger(__name__).warning("no unembedding for %r (%s); no logit effects", spec, exc)
    if unembed is not None and unembed[0].shape[1] != sr.sae.cfg.d_in:
        unembed = None  # not the residual width (e.g. an MLP hook): logit effects do not apply directly
    if text is not None and not spec:
        raise ValueError("--text needs a model: pass --model SPEC")
    if ablate_windows < 0:
        raise ValueError(f"--ablate-windows must be >= 0, got {ablate_windows}")
    model = None
    if text is not None or (model_spec and ablate_windows):  # loaded before anything is written
        import interp
        from interp.infra.sae_folder import check_compatible

        model = interp.load_model(spec)
        if not model.hook_points([sr.hook]):
            raise ValueError(f"{spec} has no hook {sr.hook!r} (the SAE's); pass the --model the store was built from")
        check_compatible(sr.sae, model, sr.hook)  # its width too: a wider model names the SAE's own as the fix
    ablation = latent_ablation(sr, model, spec, ablate_windows) if model_spec and ablate_windows else None
    from interp.cli.dashboard import prepare_out
    from interp.store.lock import holding

    with holding(out, "the dashboard folder"):  # a second writer into `out` is refused, not raced
        prepare_out(str(out), overwrite)
        return _write(sr, out, cfg, spec, tok, unembed, model, text, d_sae, ablation)


def latent_ablation(sr: SaeRows, model: Any, spec: str | None, max_windows: int = 20, max_batch: int = 16) -> Any:
    """The `WindowAblation` of the SAE's latents on `model` at the SAE's hook: latent i's contribution is its
    code times decoder(e_i) - decoder(0) (W_dec[i] in the hook's units; PolySAE: its linear atom)."""
    from interp.dashboards.ablation import WindowAblation
    from sae import metrics as M

    sae = sr.sae

    @torch.no_grad()
    def direction(f: int) -> torch.Tensor:
        if hasattr(sae, "linear_atoms"):
            return sae.linear_atoms()[f].detach().float()
        e = torch.zeros(2, sae.cfg.d_sae, device=sae.W_dec.device, dtype=sae.W_dec.dtype)
        e[0, f] = 1
        out = sae.decode(e).float()
        return (out[0] - out[1]).detach()

    @torch.no_grad()
    def coef(f: int, x: torch.Tensor) -> torch.Tensor:
        return M.encode(sae, x.to(sae.W_dec.device, sae.W_dec.dtype))[:, f].float().cpu()

    return WindowAblation(
        model, sr.hook, direction, coef, label=spec or "", max_batch=max_batch, max_windows=max_windows
    )


def _write(
    sr: SaeRows,
    out: str,
    cfg: Any,
    spec: str | None,
    tok: Any,
    unembed: Any,
    model: Any,
    text: str | None,
    d_sae: int,
    ablation: Any = None,
) -> Path:
    from interp.cli.dashboard import _layer
    from interp.dashboards import Vocab, collect, write_folder
    from sae import metrics as M

    src = sr.source()
    stats = collect(src, d_sae, cfg.stats)
    meta = {
        "ctx_len": sr.store.meta.ctx_len,
        "dataset": str(sr.store.meta.data.get("source", "")),
        "model_id": spec or "",
        "layer": _layer(sr.hook),
        "sae_set": Path(sr.sae_dir or "sae").name,
    }
    head = {**sr.header(), "model": spec or "(none: token ids)"}
    index = write_folder(
        out,
        stats,
        src,
        Vocab(tok),
        cfg,
        directions=M.decoder_directions(sr.sae).detach(),
        unembedding=unembed,
        head=head,
        export_meta=meta,
        ablation=ablation,
    )
    if text is not None:
        from interp.store.atomic import atomic_write_bytes

        view = text_view(
            sr,
            model,
            text,
            vocab=Vocab(tok),
            pages=set(json.loads((Path(out) / "dashboard.json").read_text())["pages"]),
            dense=stats.freq > cfg.dense,
        )
        atomic_write_bytes(Path(out) / "text.html", view.html().encode())
    return index


def feature_page(
    sae: Any, i: int, store: Any = None, max_rows: int = 16_384, exclude: str | None = None, model: str | None = None
) -> Any:
    """One latent's page, shown inline in Jupyter: `feature_page("runs/sae/c2r", 12)`."""
    from interp.cli.dashboard import _tokenizer
    from interp.dashboards import DashboardConfig, Vocab, collect
    from interp.dashboards import feature_page as _page
    from interp.dashboards.logits import load_unembedding
    from sae import metrics as M

    sr = sae_rows(sae, store, max_rows, exclude)
    from interp.dashboards import check_features

    check_features([i], sr.sae.cfg.d_sae)
    spec = model or (sr.store.meta.model if sr.store.meta.model != "synthetic" else None)
    tok = _tokenizer(spec) if spec else None
    unembed = None
    if spec:
        try:
            unembed = load_unembedding(spec)
            if unembed[0].shape[1] != sr.sae.cfg.d_in:
                unembed = None
        except Exception:  # noqa: BLE001
            unembed = None
    src = sr.source()
    cfg = DashboardConfig()
    stats = collect(src, sr.sae.cfg.d_sae, cfg.stats, progress=False)
    rule = sr.row_filter.spec if sr.row_filter is not None else "none"
    return _page(
        stats,
        src,
        i,
        Vocab(tok),
        cfg,
        M.decoder_directions(sr.sae).detach(),
        unembed,
        header=f"{sr.hook} · {stats.n_rows:,} tokens ({sr.split} rows; rows rule {rule})",
    )


def text_view(
    sae: Any,
    model: Any,
    text: str,
    store: Any = None,
    vocab: Any = None,
    pages: set[int] | None = None,
    exclude: str | None = None,
    n_features: int = 12,
    dense: Any = None,
    max_rows: int = 8192,
) -> Any:
    """Every latent's activations on your text (`TextView`, inline in Jupyter). `sae`: folder, SAE, or `SaeRows`.

    Dense latents (firing on more than 10% of the store's rows, the index's rule) are listed last, in their
    own section; `dense` ([d_sae] bool) gives them, else they are measured on the first `max_rows` rows
    `sae eval` scores."""
    from interp.dashboards import Vocab
    from interp.dashboards.text import TextView, hook_activations
    from sae import metrics as M

    sr = sae if isinstance(sae, SaeRows) else sae_rows(sae, store, max_rows, exclude)
    if dense is None:
        from interp.dashboards import DashboardConfig
        from sae.evaluate import kept_rows

        rows = kept_rows(sr.store, sr.hook, sr.rows, sr.row_filter or _KeepAll(), sr.max_rows or max_rows)[sr.hook]
        fires = torch.zeros(sr.sae.cfg.d_sae)
        for i in range(0, len(rows), 4096):
            fires += (M.encode(sr.sae, rows[i : i + 4096].float()) > 0).sum(0).float()
        dense = fires / max(len(rows), 1) > DashboardConfig().dense
    ids, x, pos = hook_activations(model, sr.hook, text)
    keep = sr.row_filter.keep_tensor(x, pos) if sr.row_filter is not None else torch.ones(len(x), dtype=torch.bool)
    z = torch.zeros(len(x), sr.sae.cfg.d_sae)
    if bool(keep.any()):  # special rows never enter the encoder (a batch-level top-k would give them the latents)
        z[keep] = M.encode(sr.sae, x[keep]).float()
    rule = sr.row_filter.spec if sr.row_filter is not None else "none"
    link = (lambda g: f"features/{g}.html" if g in pages else None) if pages else None
    return TextView(
        ids,
        z,
        vocab or Vocab(model.tokenizer),
        keep,
        n_features,
        link,
        note=f"latents of the SAE on {sr.hook}; rows rule {rule}; dense: fires on > 10% of the store's rows",
        dense=dense,
    )


class _KeepAll:
    """A row filter that keeps every row (an SAE scored with the rule 'none')."""

    def keep(self, batch: dict[str, Any]) -> torch.Tensor:
        return torch.ones(len(batch["seq"]), dtype=torch.bool)
