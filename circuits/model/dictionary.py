"""Dictionaries (SAEs, transcoders-as-SAEs, anything with codes) as the feature circuit finder sees them.

`circuits` never imports the `sae` family (families do not import each other; `tests/import_graph.py`), so
the finder accepts any object with this small protocol:

    encode(x: [..., d_model]) -> codes [..., d_sae]
    decode(codes: [..., d_sae]) -> x_hat [..., d_model]
    d_sae: int            hook: str (where it reads and is spliced, e.g. "blocks.5.hook_resid_post")

`AffineDictionary` is a plain ReLU / TopK one (random for tests and `--quick`). `load_dictionary(DIR)` reads
an SAE folder of `interp sae train` (or of sae-lens: `cfg.json` + `sae_weights.safetensors`) with sae-lens's
own loader, a third-party library every package may use, not with the `sae` family: those folders hold the
inference form in sae-lens's classes (`sae/README.md`, "Folders load in plain sae-lens"). PolySAE folders,
whose decoder has no sae-lens class, are refused with that reason. The folder passes the core's checks first
(`interp.infra.sae_folder`, as in `sae.load_sae`): a damaged config or weights file, or NaN weights, is one
error naming the file.

    d = load_dictionary("runs/bq500k_topk/ours_topk")      # d.hook == "blocks.15.hook_resid_post"
    pages = dashboard_pages("runs/dash/topk0")              # {latent: "runs/dash/topk0/features/12.html"}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor


@runtime_checkable
class Dictionary(Protocol):
    """What the feature circuit finder needs of a dictionary."""

    d_sae: int
    hook: str
    # optional: d_in (checked against the residual width) and dtype (what activations are cast to)

    def encode(self, x: Tensor) -> Tensor: ...

    def decode(self, codes: Tensor) -> Tensor: ...


class AffineDictionary:
    """codes = act((x - b_dec) W_enc + b_enc), x_hat = codes W_dec + b_dec; act is ReLU, or TopK when k is set."""

    def __init__(self, W_enc: Tensor, b_enc: Tensor, W_dec: Tensor, b_dec: Tensor, hook: str, k: int | None = None):
        if W_enc.shape[1] != W_dec.shape[0] or W_enc.shape[0] != W_dec.shape[1]:
            raise ValueError(f"W_enc {tuple(W_enc.shape)} and W_dec {tuple(W_dec.shape)} do not transpose")
        self.W_enc, self.b_enc, self.W_dec, self.b_dec = W_enc, b_enc, W_dec, b_dec
        self.hook, self.k, self.d_sae, self.d_in, self.dtype = hook, k, W_enc.shape[1], W_enc.shape[0], W_enc.dtype

    def to(self, dtype: torch.dtype) -> AffineDictionary:
        """The same dictionary in another dtype."""
        w = [t.to(dtype) for t in (self.W_enc, self.b_enc, self.W_dec, self.b_dec)]
        return AffineDictionary(*w, self.hook, self.k)

    def encode(self, x: Tensor) -> Tensor:
        pre = (x - self.b_dec) @ self.W_enc + self.b_enc
        if self.k is None:
            return torch.relu(pre)
        top = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))

    def decode(self, codes: Tensor) -> Tensor:
        return codes @ self.W_dec + self.b_dec


def random_dictionary(d_model: int, d_sae: int, hook: str, seed: int = 0, k: int | None = None) -> AffineDictionary:
    """A random ReLU (or TopK) dictionary: unit-norm decoder rows, encoder their transpose, biases that let
    about half the latents fire on typical inputs. Its reconstructions are poor; the error node carries the rest."""
    g = torch.Generator().manual_seed(seed)
    W_dec = torch.randn(d_sae, d_model, generator=g)
    W_dec = W_dec / W_dec.norm(dim=1, keepdim=True)
    b_enc = 0.1 * torch.randn(d_sae, generator=g)
    return AffineDictionary(W_dec.T.clone(), b_enc, W_dec, torch.zeros(d_model), hook, k)


class SaeLensDictionary:
    """A sae-lens `SAE` behind the protocol: its hook from `cfg.metadata.hook_name`, rows encoded flat."""

    def __init__(self, sae, hook: str | None = None, source: str = ""):
        self.sae = sae
        self.d_sae = int(sae.cfg.d_sae)
        self.d_in = int(sae.cfg.d_in)
        self.hook = hook or getattr(sae.cfg.metadata, "hook_name", None) or ""
        self.source = source
        self.dtype = sae.W_enc.dtype
        self.model_name = getattr(sae.cfg.metadata, "model_name", None)
        if not self.hook:
            raise ValueError(f"{source or 'the SAE'}: its cfg.json names no hook (metadata.hook_name); pass hook=")

    def encode(self, x: Tensor) -> Tensor:
        return self.sae.encode(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], self.d_sae)

    def decode(self, codes: Tensor) -> Tensor:
        return self.sae.decode(codes.reshape(-1, self.d_sae)).reshape(*codes.shape[:-1], self.d_in)


def load_dictionary(path: str | Path, device: str = "cpu") -> SaeLensDictionary:
    """The SAE folder at `path` (cfg.json + sae_weights.safetensors), loaded with sae-lens's `SAE.load_from_disk`."""
    p = Path(path)
    cfg_file = p / "cfg.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{p} is not an SAE folder (no cfg.json); give a folder written by `interp sae train`")
    try:
        arch = json.loads(cfg_file.read_text()).get("architecture")
    except (json.JSONDecodeError, AttributeError):
        raise ValueError(f"{cfg_file} is not a JSON object; is the folder damaged?") from None
    if str(arch).startswith("poly"):
        raise ValueError(
            f"{p}: a PolySAE ({arch}); its polynomial decoder has no sae-lens class, so it loads only through "
            "`import sae`, which circuits may not do. Use a TopK/BatchTopK/JumpReLU/ReLU SAE folder"
        )
    from sae_lens import SAE
    from sae_lens.registry import SAE_CLASS_REGISTRY

    from interp.infra.sae_folder import check_finite_weights, check_sae_folder

    check_sae_folder(p, SAE_CLASS_REGISTRY)  # the checks `sae.load_sae` makes: config, weights header, shapes
    try:
        sae = SAE.load_from_disk(str(p), device=device)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:160]
        raise ValueError(f"{p}: sae-lens cannot load this SAE ({type(e).__name__}: {first})") from None
    check_finite_weights(sae.state_dict(), p)
    sae.eval()
    for q in sae.parameters():
        q.requires_grad_(False)
    return SaeLensDictionary(sae, source=str(p))


def dashboard_pages(folder: str | Path | None) -> dict[int, str]:
    """{latent: path of its page} of a dashboard folder (`interp sae dashboard --out DIR`); {} for None."""
    if folder is None:
        return {}
    f = Path(folder)
    summary = f / "dashboard.json"
    if not summary.is_file():
        raise FileNotFoundError(
            f"{f} is not a dashboard folder (no dashboard.json); make one with `interp sae dashboard`"
        )
    pages = json.loads(summary.read_text()).get("pages", [])
    return {int(i): str(f / "features" / f"{int(i)}.html") for i in pages}
