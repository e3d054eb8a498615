"""`interp dashboard`: feature dashboards of any "feature x token" activations in a store.

    interp dashboard --store runs/demo/store --hooks blocks.15.hook_mlp_out --out runs/dash_mlp      # channels as
    features
    interp dashboard --store runs/demo/store --acts latents.safetensors --out runs/dash_acts        # precomputed [rows,
    F]
    interp dashboard ... --features 12,345            # pages for these features only
    interp dashboard ... --top 100 --order max        # pages for the first 100 by max activation
    interp dashboard ... --text "The cat sat on the mat."   # also out/text.html: every feature on your text

SAE latents: `interp sae dashboard --sae DIR --store DIR --out DIR` (same options; adds FVU/L0, decoder
neighbours and logit effects). Only the tokenizer is loaded (the model only for `--text`).
"""

from __future__ import annotations

import typer

from interp.cli import options as O


def dashboard_options_help() -> dict[str, str]:
    """Help texts shared with `interp sae dashboard`, so both commands read the same."""
    return {
        "out": "Folder to write: index.html, features/<i>.html|.json|.neuronpedia.json (opens offline).",
        "features": "Comma-separated feature indices to give a page, e.g. 12,345 (default: --top N in --order).",
        "top": "Pages for the first N features in --order.",
        "order": "interpretable (live, not dense, by max activation; then dense; then dead), max, freq, mean or index.",
        "max_rows": "Ordinary rows to cover (the first ones of the split, special rows not counted), as `interp sae "
        "eval --max-rows`.",
        "exclude": "Special rows to leave out of the statistics (interp.cache.rows spec), e.g. none, bos, "
        "positions:0,1, norm-outliers:10.",
        "text": "Also write text.html: every feature's activations on this text (loads the model).",
        "model": "Model spec for the tokenizer (and --text) (default: the store's model).",
        "overwrite": "Replace an existing dashboard folder.",
    }


DASHBOARD_NAMES = (
    "index.html",
    "features",
    ".features.partial",
    "neuronpedia_batch.json",
    "dashboard.json",
    "text.html",
)
"""What a dashboard folder holds (a killed or failed run leaves a subset of these: its own leftovers)."""


def prepare_out(out: str, overwrite: bool) -> None:
    """Refuse to write into a file, a non-dashboard folder, or (without --overwrite) a finished dashboard.

    A folder holding only a dashboard's own files but no `dashboard.json` (the last file written) is
    the leftover of a run killed or failed half-way: it is rebuilt, with or without --overwrite.
    """
    from pathlib import Path

    from interp.store.atomic import is_temp_name
    from interp.store.lock import LOCK_NAME

    p = Path(out)
    if p.exists() and not p.is_dir():
        raise ValueError(f"--out {out} is a file; give a folder for the dashboard")
    if not p.is_dir():
        return
    other = [c.name for c in p.iterdir() if c.name not in DASHBOARD_NAMES + (LOCK_NAME,) and not is_temp_name(c.name)]
    if other:
        raise ValueError(f"--out {out} is a folder with other content ({other[0]}); give a new or empty folder")
    if (p / "dashboard.json").exists() and not overwrite:
        raise ValueError(f"--out {out} already holds a dashboard; add --overwrite to replace it")


def register(app: typer.Typer) -> None:
    H = dashboard_options_help()

    @app.command()
    def dashboard(
        store: str = typer.Option(..., metavar="PATH", help="ActivationStore folder (its token ids give the text)."),
        out: str = typer.Option(..., metavar="DIR", help=H["out"]),
        hooks: str | None = typer.Option(
            None, "--hooks", metavar="NAME", help="Use this hook's channels as the features (values are not clamped)."
        ),
        acts: str | None = typer.Option(
            None,
            metavar="PATH",
            help="safetensors file with an 'acts' tensor [rows, features] aligned with the store's first rows.",
        ),
        model: str | None = typer.Option(None, metavar="SPEC", help=H["model"]),
        features: str | None = typer.Option(None, metavar="TEXT", help=H["features"]),
        top: int = typer.Option(50, metavar="INT", help=H["top"]),
        order: str = typer.Option("interpretable", help=H["order"]),
        max_rows: int = typer.Option(32_768, metavar="INT", help=H["max_rows"]),
        exclude: str | None = typer.Option(
            None, metavar="TEXT", help=H["exclude"] + " Default: the toolkit's rule (interp.cache.rows)."
        ),
        text: str | None = typer.Option(None, metavar="TEXT", help=H["text"]),
        overwrite: bool = typer.Option(False, "--overwrite", help=H["overwrite"]),
        hook: str | None = typer.Option(None, "--hook", hidden=True),
    ) -> None:
        """Write a feature dashboard folder: sortable index, one page per chosen feature, JSON exports."""
        try:
            hook = O.one_hook(hooks, hook)
            path = run_dashboard(
                store, out, hook, acts, model, features, top, order, max_rows, exclude, text, overwrite
            )
        except (ValueError, FileNotFoundError, KeyError) as exc:
            typer.echo(f"error: {str(exc).strip(chr(39))}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"wrote {path}")


def run_dashboard(
    store: str,
    out: str,
    hook: str | None,
    acts: str | None,
    model: str | None,
    features: str | None,
    top: int,
    order: str,
    max_rows: int,
    exclude: str | None,
    text: str | None,
    overwrite: bool,
):
    """The body of `interp dashboard` (checks everything before writing anything)."""
    from interp.dashboards import DashboardConfig, parse_features
    from interp.infra.tensor_file import read_tensors
    from interp.store import ActivationStore

    if (hook is None) == (acts is None):
        raise ValueError("give exactly one of --hooks (channels as features) or --acts (a safetensors file)")
    if text is not None and not hook:
        raise ValueError("--text needs --hooks (the model computes that hook's rows for your text)")
    if max_rows < 1:
        raise ValueError(f"--max-rows must be >= 1, got {max_rows}")
    cfg = DashboardConfig(
        features=parse_features(features), top=top, order=order, title=f"{hook or acts} on {model or '?'}"
    )
    st = ActivationStore.open(store)
    spec = model or st.meta.model
    tok = _tokenizer(spec, explicit=model is not None)  # before anything is written: a bad --model is an error
    prepare_out(out, overwrite)
    from interp.store.lock import holding

    with holding(out, "the dashboard folder"):  # a second writer into --out is refused, not raced
        prepare_out(out, overwrite)  # again under the lock: the other writer may have finished meanwhile
        return _write_dashboard(st, out, hook, acts, spec, cfg, tok, max_rows, exclude, text, read_tensors)


def _write_dashboard(st, out, hook, acts, spec, cfg, tok, max_rows, exclude, text, read_tensors):
    import torch

    from interp.dashboards import StoreSource, TensorSource, Vocab, collect, write_folder
    from interp.dashboards.build import check_features

    filt = None
    n = min(len(st), max_rows)
    head: dict[str, str] = {"store": str(st.path)}
    if hook:
        filt = row_filter(exclude, st, hook)
        src = StoreSource(st, hook, row_filter=filt, max_kept=max_rows)
        n_feat = st.hooks[hook][0]
        head["rows rule"] = filt.spec if filt is not None else "none"
    else:
        if exclude:
            raise ValueError(
                "--exclude applies to --hook rows; with --acts, zero the rows you want left out in the file"
            )
        # names the file for random bytes, truncation, a missing 'acts' or a wrong rank (interp.infra.tensor_file)
        a = read_tensors(acts, what="--acts", need={"acts": 2}, keys=["acts"])[0]["acts"].float()[:n]
        if a.dim() != 2 or a.shape[0] != n:
            raise ValueError(
                f"--acts has shape {tuple(a.shape)} but {n} store rows are used: give one row per store row"
            )
        idx = st.get_rows(torch.arange(n), hooks=[])
        src = TensorSource(a, idx["tokens"].long(), idx["seq"], idx["pos"])
        n_feat = a.shape[1]
        head["rows rule"] = "none (precomputed activations)"
    check_features(cfg.features, n_feat)
    cfg.title = f"{hook or acts} · {spec}"
    vocab = Vocab(tok)
    head["model"] = spec
    head["hook" if hook else "activations"] = hook or acts
    stats = collect(src, n_feat, cfg.stats)
    meta = {
        "ctx_len": st.meta.ctx_len,
        "dataset": str(st.meta.data.get("source", st.meta.data)),
        "model_id": spec,
        "layer": _layer(hook),
        "sae_set": hook or "acts",
    }
    if text is not None:  # the model and the hook on it are checked before anything is written
        import interp
        from interp.dashboards.text import TextView, hook_activations

        ids, x, pos = hook_activations(interp.load_model(spec), hook, text)
    index = write_folder(out, stats, src, vocab, cfg, head=head, export_meta=meta)
    if text is not None:
        keep = filt.keep_tensor(x, pos) if filt is not None else None
        pages = set(cfg.features or []) | set(_pages(out))
        view = TextView(
            ids,
            x,
            vocab,
            keep,
            link=lambda g: f"features/{g}.html" if g in pages else None,
            note=f"{hook} channels of {spec}; rows rule {head['rows rule']}; dense: fires on > "
            f"{100 * cfg.dense:g}% of the store's rows, listed last as in the index",
            dense=stats.freq > cfg.dense,
        )
        from pathlib import Path

        from interp.store.atomic import atomic_write_bytes

        atomic_write_bytes(Path(out) / "text.html", view.html().encode())
    return index


def row_filter(exclude: str | None, store, hook: str, recorded: dict | None = None):
    """The shared special-row rule (`interp.cache.rows`) bound to this store and hook (reusing the reference
    norm an artifact recorded for the same rule); None for 'none'."""
    from interp.cache.rows import RowRule
    from interp.cache.rows import row_filter as bind

    if RowRule.parse(exclude).spec == "none":
        return None
    return bind(exclude, store, hook, recorded)


def _tokenizer(spec: str, explicit: bool = False):
    """The tokenizer of `spec`. A --model the user named must load (else an error naming it); the store's
    recorded model may be missing on this machine, and then the pages show token ids with a warning."""
    from interp.dashboards import load_tokenizer

    try:
        return load_tokenizer(spec)
    except Exception as exc:  # noqa: BLE001 - a dashboard still works with token ids
        if explicit:
            raise ValueError(
                f"--model {spec!r} gives no tokenizer ({exc}); pass a spec from `interp models`, "
                "or leave --model out to use the store's model"
            ) from exc
        import logging

        logging.getLogger(__name__).warning("no tokenizer for %r (%s); showing token ids", spec, exc)
        return None


def _layer(hook: str | None) -> int:
    import re

    m = re.match(r"blocks\.(\d+)\.", hook or "")
    return int(m[1]) if m else 0


def _pages(out: str) -> list[int]:
    import json
    from pathlib import Path

    return json.loads((Path(out) / "dashboard.json").read_text())["pages"]
