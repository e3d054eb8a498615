"""`interp dashboard`: a feature dashboard of any "feature x token" activations in a store.

    interp dashboard --store runs/demo/store --hook blocks.15.mlp.hook_post --out dash.html   # neurons as features
    interp dashboard --store runs/demo/store --acts latents.safetensors --out dash.html       # precomputed [rows, F]

SAE latents: `interp sae dashboard --sae DIR --store DIR --out FILE` (the SAE family encodes the rows
and calls the same renderer).
"""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def dashboard(
        store: str = typer.Option(..., help="ActivationStore folder (its token ids give the text)."),
        out: str = typer.Option(..., help="HTML file to write (self-contained, opens offline)."),
        hook: Optional[str] = typer.Option(None, help="Use this hook's channels as the features (rows must be vectors)."),
        acts: Optional[str] = typer.Option(None, help="safetensors file with an 'acts' tensor [rows, features] aligned with the store's first rows."),
        model: Optional[str] = typer.Option(None, help="Model spec for the tokenizer (default: the store's model)."),
        n_features: int = typer.Option(40, help="Features with a page (most frequent first)."),
        max_rows: int = typer.Option(16_384, help="Store rows to use."),
    ) -> None:
        """Write a feature dashboard (top contexts, quantile examples, histogram, co-activation)."""
        import torch
        from safetensors.torch import load_file

        import interp
        from interp.dashboards import TokenRows, write_dashboard
        from interp.store import ActivationStore

        try:
            if (hook is None) == (acts is None):
                raise ValueError("give exactly one of --hook (channels as features) or --acts (a safetensors file)")
            st = ActivationStore.open(store)
            n = min(len(st), max_rows)
            rows = st.get_rows(torch.arange(n), hooks=[hook] if hook else [])
            if hook:
                if len(st.hooks[hook]) != 1:
                    raise ValueError(f"{hook} rows have shape {list(st.hooks[hook])}; a dashboard needs vectors")
                feats = rows[hook].float().clamp_min(0)
            else:
                feats = load_file(acts)["acts"].float()[:n]
                if feats.shape[0] != n:
                    raise ValueError(f"--acts has {feats.shape[0]} rows but {n} store rows are used")
            try:
                tok = interp.load_model(model or st.meta.model).tokenizer
                text = [tok.decode([t]) for t in rows["tokens"].tolist()]
            except Exception:  # noqa: BLE001 - fall back to ids
                text = [f"[{t}]" for t in rows["tokens"].tolist()]
            path = write_dashboard(out, feats, TokenRows(text, rows["seq"], rows["pos"]),
                                   title=f"{hook or acts} on {st.meta.model}", max_features=n_features)
        except (ValueError, FileNotFoundError, KeyError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"wrote {path}")
