"""Transcoders as the attribution graph sees them: per layer, an encoder reading the MLP's normalised input and a
decoder writing the MLP's output.

`circuits` never imports the `sae` family, so it reads the folders `interp sae train --arch transcoder|skip_transcoder|
clt` writes in the on-disk form circuit-tracer 0.5 itself loads from a local folder (one reader for both):

- per-layer (PLT) and skip transcoders: `layer_{i}.safetensors` with `W_enc` [d_tc, d_model] (pre-activation
  `x @ W_enc.T + b_enc`), `W_dec` [d_tc, d_model], `b_enc`, `b_dec`, optionally `activation_function.threshold`
  [d_tc] (JumpReLU: `pre * (pre > threshold)`; ReLU without it) and `W_skip` [d_model, d_model] (adds `x @ W_skip.T`);
- cross-layer transcoders (CLT): `W_enc_{i}.safetensors` (`W_enc_{i}`, `b_enc_{i}`, `b_dec_{i}`, `threshold_{i}`) and
  `W_dec_{i}.safetensors` (`W_dec_{i}` [d_tc, n_layers - i, d_model], slot j writing into layer i + j). The output
  of layer l is `b_dec_l + sum_{i <= l} acts_i @ W_dec_i[:, l - i]`.

Every layer reads `blocks.{l}.ln2.hook_normalized` (the normalised MLP input before the norm's weight) and writes
`blocks.{l}.hook_mlp_out`. Weights are read whole into float32 (a SmolLM2 set of 30 layers x 2,048 latents is
~300 MB); `decoder_rows(l, feats)` gives what a graph needs of the decoder.

    tc = load_transcoders("runs/transcoders/smollm2_plt")
    acts = tc.encode(3, x_norm)              # [n_pos, d_tc], JumpReLU / ReLU
    out = tc.reconstruct([acts_0, ...], x)  # [n_layers, n_pos, d_model], skip and b_dec included
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

INPUT_HOOK = "blocks.{layer}.ln2.hook_normalized"
OUTPUT_HOOK = "blocks.{layer}.hook_mlp_out"


@dataclass
class Transcoders:
    """A set of transcoders, one encoder per layer; `cross_layer` decoders write into every later layer."""

    W_enc: list[Tensor]  # [d_tc, d_model] per layer
    b_enc: list[Tensor]  # [d_tc]
    W_dec: list[Tensor]  # PLT [d_tc, d_model]; CLT [d_tc, n_layers - l, d_model]
    b_dec: Tensor  # [n_layers, d_model]
    threshold: list[Tensor] | None = None  # JumpReLU thresholds [d_tc] per layer; None: ReLU
    W_skip: list[Tensor] | None = None  # [d_model, d_model] per layer (skip transcoders)
    cross_layer: bool = False
    source: str = ""
    layers: list[int] | None = None  # the model layers covered (transcoders.json's `layers`); None: not recorded

    @property
    def n_layers(self) -> int:
        return len(self.W_enc)

    @property
    def d_model(self) -> int:
        return int(self.W_enc[0].shape[1])

    @property
    def d_tc(self) -> int:
        return int(self.W_enc[0].shape[0])

    @property
    def kind(self) -> str:
        return "clt" if self.cross_layer else ("skip" if self.W_skip is not None else "plt")

    def pre(self, layer: int, x: Tensor) -> Tensor:
        """[..., d_tc] pre-activations of layer `layer` for normalised MLP inputs x [..., d_model]."""
        return x.float() @ self.W_enc[layer].T + self.b_enc[layer]

    def encode(self, layer: int, x: Tensor) -> Tensor:
        """[..., d_tc] feature activations (JumpReLU with the stored thresholds, else ReLU)."""
        pre = self.pre(layer, x)
        if self.threshold is None:
            return torch.relu(pre)
        return pre * (pre > self.threshold[layer])

    def skip(self, layer: int, x: Tensor) -> Tensor:
        """[..., d_model] the affine skip's contribution (zeros for transcoders without one)."""
        if self.W_skip is None:
            return torch.zeros_like(x, dtype=torch.float32)
        return x.float() @ self.W_skip[layer].T

    def writes(self, source: int) -> range:
        """The layers whose MLP outputs layer `source`'s features write into."""
        return range(source, self.n_layers) if self.cross_layer else range(source, source + 1)

    def decoder_rows(self, source: int, feats: Tensor, target: int) -> Tensor:
        """[len(feats), d_model]: the decoder rows of layer `source`'s features `feats` into layer `target`."""
        if self.cross_layer:
            return self.W_dec[source][feats, target - source]
        if target != source:
            raise ValueError(f"a per-layer transcoder of layer {source} writes only into layer {source}")
        return self.W_dec[source][feats]

    def reconstruct(self, acts: list[Tensor], inputs: Tensor) -> Tensor:
        """[n_layers, ..., d_model]: each layer's MLP output as the transcoders write it from `acts` (per layer,
        [..., d_tc]) and the normalised inputs [n_layers, ..., d_model] (for the skip)."""
        out = torch.stack([self.b_dec[layer] + self.skip(layer, inputs[layer]) for layer in range(self.n_layers)])
        for source in range(self.n_layers):
            for target in self.writes(source):
                w = self.W_dec[source][:, target - source] if self.cross_layer else self.W_dec[source]
                out[target] = out[target] + acts[source].float() @ w
        return out


NEED_EVERY_LAYER = "attribution graphs need every layer of the model: retrain without --layers"


def _covered(path: Path) -> list[int] | None:
    """transcoders.json's `layers` (the model layers the set covers), when the folder records them."""
    try:
        layers = json.loads((path / "transcoders.json").read_text()).get("layers")
    except (OSError, ValueError, AttributeError):
        return None
    ok = isinstance(layers, list) and layers and all(isinstance(x, int) and not isinstance(x, bool) for x in layers)
    return layers if ok else None


def check_covers(tc: Transcoders, n_layers: int, d_model: int | None = None) -> None:
    """One clear error for a set trained with `--layers` on only some of a model's `n_layers` layers (known from
    transcoders.json's `layers`; a set without them, or of another width, is left to the caller's own check)."""
    if tc.layers is None or (d_model is not None and d_model != tc.d_model):
        return
    if len(tc.layers) < n_layers or tc.layers != list(range(len(tc.layers))):
        raise ValueError(
            f"{tc.source or 'the transcoders'} cover layers {_span(tc.layers)} of the model's {n_layers}; "
            f"{NEED_EVERY_LAYER}"
        )


def _span(layers: list[int]) -> str:
    return (
        f"{layers[0]}-{layers[-1]}"
        if len(layers) > 2 and layers == list(range(layers[0], layers[-1] + 1))
        else str(layers)
    )


def _check_layers(path: Path, pattern: str) -> int:
    found = sorted(path.glob(pattern.format(i="*")))
    n = len(found)
    missing = [pattern.format(i=i) for i in range(n) if not (path / pattern.format(i=i)).is_file()]
    if not n or missing:
        raise ValueError(f"{path}: expected {pattern.format(i='0')} .. {pattern.format(i=n - 1)}; missing {missing}")
    return n


def _read(file: Path) -> dict[str, Tensor]:
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            return {k: f.get_tensor(k).float() for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    except Exception as e:  # safetensors raises its own error types for damaged headers
        raise ValueError(f"{file}: not a readable safetensors file ({type(e).__name__}: {str(e)[:120]})") from None


def _need(tensors: dict[str, Tensor], key: str, file: Path) -> Tensor:
    if key not in tensors:
        raise ValueError(f"{file}: no tensor {key!r} (has {sorted(tensors)})")
    t = tensors[key]
    if not torch.isfinite(t).all():
        raise ValueError(f"{file}: {key} holds NaN or infinite values")
    return t


def load_transcoders(path: str | Path) -> Transcoders:
    """A transcoder folder in circuit-tracer's local form (above), per-layer or cross-layer."""
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: no such transcoder folder; train one with `interp sae train --arch transcoder`")
    covered = _covered(p)
    if covered is not None and covered != list(range(len(covered))):
        raise ValueError(
            f"{p} holds transcoders for layers {_span(covered)} only (transcoders.json); {NEED_EVERY_LAYER}"
        )
    if (p / "W_enc_0.safetensors").is_file():
        n = _check_layers(p, "W_enc_{i}.safetensors")
        enc = [_read(p / f"W_enc_{i}.safetensors") for i in range(n)]
        dec = [_read(p / f"W_dec_{i}.safetensors") for i in range(n)]
        files = [p / f"W_enc_{i}.safetensors" for i in range(n)]
        has_threshold = "threshold_0" in enc[0]
        tc = Transcoders(
            W_enc=[_need(e, f"W_enc_{i}", f) for i, (e, f) in enumerate(zip(enc, files, strict=True))],
            b_enc=[_need(e, f"b_enc_{i}", f) for i, (e, f) in enumerate(zip(enc, files, strict=True))],
            W_dec=[_need(d, f"W_dec_{i}", p / f"W_dec_{i}.safetensors") for i, d in enumerate(dec)],
            b_dec=torch.stack([_need(e, f"b_dec_{i}", f) for i, (e, f) in enumerate(zip(enc, files, strict=True))]),
            threshold=[
                _need(e, f"threshold_{i}", f).reshape(-1) for i, (e, f) in enumerate(zip(enc, files, strict=True))
            ]
            if has_threshold
            else None,
            cross_layer=True,
            source=str(p),
        )
    else:
        n = _check_layers(p, "layer_{i}.safetensors")
        files = [p / f"layer_{i}.safetensors" for i in range(n)]
        layers = [_read(f) for f in files]
        has_threshold = "activation_function.threshold" in layers[0]
        has_skip = "W_skip" in layers[0]
        tc = Transcoders(
            W_enc=[_need(t, "W_enc", f) for t, f in zip(layers, files, strict=True)],
            b_enc=[_need(t, "b_enc", f) for t, f in zip(layers, files, strict=True)],
            W_dec=[_need(t, "W_dec", f) for t, f in zip(layers, files, strict=True)],
            b_dec=torch.stack([_need(t, "b_dec", f) for t, f in zip(layers, files, strict=True)]),
            threshold=[
                _need(t, "activation_function.threshold", f).reshape(-1) for t, f in zip(layers, files, strict=True)
            ]
            if has_threshold
            else None,
            W_skip=[_need(t, "W_skip", f) for t, f in zip(layers, files, strict=True)] if has_skip else None,
            source=str(p),
        )
    if covered is not None and len(covered) != tc.n_layers:
        raise ValueError(
            f"{p}: transcoders.json lists layers {_span(covered)} but the folder holds {tc.n_layers} layer files: "
            "retrain into an empty folder"
        )
    tc.layers = covered
    check_shapes(tc)
    return tc


def check_shapes(tc: Transcoders) -> None:
    """One clear error for a set whose layers disagree in shape."""
    n, d_tc, d = tc.n_layers, tc.d_tc, tc.d_model
    for i in range(n):
        want_dec = (d_tc, n - i, d) if tc.cross_layer else (d_tc, d)
        got = {
            "W_enc": (tuple(tc.W_enc[i].shape), (d_tc, d)),
            "b_enc": (tuple(tc.b_enc[i].shape), (d_tc,)),
            "W_dec": (tuple(tc.W_dec[i].shape), want_dec),
        }
        if tc.threshold is not None:
            got["threshold"] = (tuple(tc.threshold[i].shape), (d_tc,))
        if tc.W_skip is not None:
            got["W_skip"] = (tuple(tc.W_skip[i].shape), (d, d))
        for name, (shape, want) in got.items():
            if shape != want:
                raise ValueError(f"{tc.source or 'transcoders'}: layer {i} {name} is {shape}, expected {want}")
    if tuple(tc.b_dec.shape) != (n, d):
        raise ValueError(f"{tc.source or 'transcoders'}: b_dec is {tuple(tc.b_dec.shape)}, expected {(n, d)}")


def save_transcoders(tc: Transcoders, path: str | Path, meta: dict | None = None) -> Path:
    """Write `tc` in the folder form above (what `load_transcoders` and circuit-tracer read), plus
    `transcoders.json` saying its kind and hooks. Used for random sets in tests and `--quick`."""
    p = Path(path)
    p.mkdir(parents=True, exist_ok=True)
    for i in range(tc.n_layers):
        if tc.cross_layer:
            enc = {f"W_enc_{i}": tc.W_enc[i], f"b_enc_{i}": tc.b_enc[i], f"b_dec_{i}": tc.b_dec[i]}
            if tc.threshold is not None:
                enc[f"threshold_{i}"] = tc.threshold[i]
            save_file({k: v.contiguous() for k, v in enc.items()}, str(p / f"W_enc_{i}.safetensors"))
            save_file({f"W_dec_{i}": tc.W_dec[i].contiguous()}, str(p / f"W_dec_{i}.safetensors"))
        else:
            layer = {"W_enc": tc.W_enc[i], "W_dec": tc.W_dec[i], "b_enc": tc.b_enc[i], "b_dec": tc.b_dec[i]}
            if tc.threshold is not None:
                layer["activation_function.threshold"] = tc.threshold[i]
            if tc.W_skip is not None:
                layer["W_skip"] = tc.W_skip[i]
            save_file({k: v.contiguous() for k, v in layer.items()}, str(p / f"layer_{i}.safetensors"))
    info = {
        "format": "interp-transcoders",
        "version": 1,
        "kind": tc.kind,
        "n_layers": tc.n_layers,
        "layers": list(range(tc.n_layers)),
        "d_model": tc.d_model,
        "d_transcoder": tc.d_tc,
        "activation": "relu" if tc.threshold is None else "jumprelu",
        "input_hook": INPUT_HOOK,
        "output_hook": OUTPUT_HOOK,
        **(meta or {}),
    }
    (p / "transcoders.json").write_text(json.dumps(info, indent=1) + "\n")
    return p


def random_transcoders(
    n_layers: int, d_model: int, d_tc: int, kind: str = "plt", seed: int = 0, threshold: float = 0.5
) -> Transcoders:
    """A random set (unit-norm decoder rows, encoder their transpose, a JumpReLU threshold letting a fraction
    fire): for tests and `--quick`. Its reconstructions are poor; the error nodes carry the rest."""
    if kind not in ("plt", "skip", "clt"):
        raise ValueError(f"kind must be plt, skip or clt, not {kind!r}")
    g = torch.Generator().manual_seed(seed)

    def unit(*shape):
        w = torch.randn(*shape, generator=g)
        return w / w.norm(dim=-1, keepdim=True)

    W_enc = [unit(d_tc, d_model) for _ in range(n_layers)]
    if kind == "clt":
        W_dec = [unit(d_tc, n_layers - i, d_model) / (n_layers - i) ** 0.5 for i in range(n_layers)]
    else:
        W_dec = [unit(d_tc, d_model) for _ in range(n_layers)]
    return Transcoders(
        W_enc=W_enc,
        b_enc=[0.1 * torch.randn(d_tc, generator=g) for _ in range(n_layers)],
        W_dec=W_dec,
        b_dec=0.01 * torch.randn(n_layers, d_model, generator=g),
        threshold=[torch.full((d_tc,), threshold) for _ in range(n_layers)],
        W_skip=[0.05 * torch.randn(d_model, d_model, generator=g) for _ in range(n_layers)] if kind == "skip" else None,
        cross_layer=kind == "clt",
        source=f"random {kind} (seed {seed})",
    )
