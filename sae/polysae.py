"""PolySAE: a polynomial decoder over a shared low-rank projection (Koromilas et al., ICML 2026;
arXiv 2602.01322; official code `sae_lens/saes/polysae.py`, mode `shared_u=True`).

The encoder is the base SAE's (TopK, BatchTopK or ReLU). The decoder maps codes z [.., n] through a
shared projection U [n, R1] with orthonormal columns, then adds pairwise and cubic terms:

    a  = z U
    x̂  = b_dec + a C1ᵀ + λ2 (a[:, :R2] ⊙ a[:, :R2]) C2ᵀ + λ3 (a[:, :R3] ⊙ a[:, :R3] ⊙ a[:, :R3]) C3ᵀ

so latent i has the linear atom A_i = C1 U_iᵀ and latent pairs the interaction atom
B_ij = C2 (U_i[:R2] ⊙ U_j[:R2]). Defaults from the official code: ranks (d_in, 64, 64), λ2 = -0.5,
λ3 = +0.5 (learnable), U orthogonal-initialised and re-orthonormalised by QR (signs fixed by diag R)
after every optimizer step, no decoder-norm rescaling, AuxK through the polynomial decoder.
Architectures: `poly` (TopK, the paper's main setting), `poly_batchtopk`, `poly_relu`.

The retraction runs at the start of each training forward pass, which gives every forward pass the
same U as a retraction right after the previous optimizer step would, so any trainer (sae-lens's
`SAETrainer` included) trains it without a post-step hook; saving retracts once more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from sae_lens.saes.topk_sae import calculate_topk_aux_acts
from torch import Tensor, nn

from sae._bases import as_loss_dict, auxk_loss, make_variant


@dataclass(kw_only=True)
class PolyFields:
    """PolySAE decoder settings, mixed into the base SAE's config."""

    rank1: int | None = None
    """R1, the width of the shared projection U (None: d_in, as in the paper)."""
    rank2: int = 64
    """R2 <= R1: leading components of zU used by the pairwise term (0 turns it off)."""
    rank3: int = 64
    """R3 <= R1: leading components used by the cubic term (0 turns it off)."""
    lambda2_init: float = -0.5
    """Initial value of the learnable pairwise coefficient λ2."""
    lambda3_init: float = 0.5
    """Initial value of the learnable cubic coefficient λ3."""
    retract: bool = True
    """Re-orthonormalise U by QR every step (False is the paper's "no QR" ablation)."""

    def _check_poly(self) -> None:
        r1 = self.rank1 if self.rank1 is not None else self.d_in  # type: ignore[attr-defined]
        if not (0 < r1 <= self.d_sae and 0 <= self.rank2 <= r1 and 0 <= self.rank3 <= r1):  # type: ignore[attr-defined]
            raise ValueError(
                f"PolySAE needs 0 < rank1 <= d_sae and 0 <= rank2, rank3 <= rank1; got rank1={r1}, "
                f"rank2={self.rank2}, rank3={self.rank3}, d_sae={self.d_sae}"  # type: ignore[attr-defined]
            )


class PolyMixin:
    """Polynomial decoder over the base SAE's encoder. W_dec stays as a frozen placeholder that is kept
    equal to the row-normalised linear atoms U C1ᵀ on save (for tools that read W_dec)."""

    U: nn.Parameter
    C1: nn.Parameter
    C2: nn.Parameter
    C3: nn.Parameter
    lambda2: nn.Parameter
    lambda3: nn.Parameter

    @property
    def ranks(self) -> tuple[int, int, int]:
        cfg = self.cfg
        return (cfg.rank1 if cfg.rank1 is not None else cfg.d_in, cfg.rank2, cfg.rank3)

    def initialize_weights(self) -> None:
        super().initialize_weights()
        cfg, (r1, r2, r3) = self.cfg, self.ranks
        kw: dict[str, Any] = {"dtype": self.dtype, "device": self.device}
        self.W_dec.requires_grad_(False)
        self.U = nn.Parameter(torch.empty(cfg.d_sae, r1, **kw))
        self.C1 = nn.Parameter(torch.empty(cfg.d_in, r1, **kw))
        self.C2 = nn.Parameter(torch.empty(cfg.d_in, r2, **kw))
        self.C3 = nn.Parameter(torch.empty(cfg.d_in, r3, **kw))
        self.lambda2 = nn.Parameter(torch.tensor(cfg.lambda2_init, **kw))
        self.lambda3 = nn.Parameter(torch.tensor(cfg.lambda3_init, **kw))
        if self.device.type != "meta":
            nn.init.orthogonal_(self.U)
            for c in (self.C1, self.C2, self.C3):
                if c.numel():
                    nn.init.kaiming_uniform_(c)

    def poly_terms(self, z: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_in"]:
        """The decoder without b_dec: a C1ᵀ + λ2 a²[:R2] C2ᵀ + λ3 a³[:R3] C3ᵀ with a = zU."""
        _, r2, r3 = self.ranks
        a = z.to_dense() @ self.U if z.is_sparse else z @ self.U
        y = a @ self.C1.T
        if r2:
            y = y + self.lambda2 * (a[..., :r2].square() @ self.C2.T)
        if r3:
            y = y + self.lambda3 * (a[..., :r3].pow(3) @ self.C3.T)
        return y

    def decode(self, feature_acts: Tensor) -> Tensor:
        out = self.hook_sae_recons(self.poly_terms(feature_acts) + self.b_dec)
        out = self.run_time_activation_norm_fn_out(out)
        return self.reshape_fn_out(out, self.d_head)

    def linear_atoms(self) -> Float[Tensor, "d_sae d_in"]:
        """A_i = C1 U_iᵀ, one row per latent (the latent's linear decoder direction)."""
        return self.U @ self.C1.T

    def pair_atom(self, i: int, j: int) -> Float[Tensor, " d_in"]:
        """B_ij = C2 (U_i[:R2] ⊙ U_j[:R2]); the pairwise term is λ2 Σ_ij z_i z_j B_ij."""
        r2 = self.ranks[1]
        return self.C2 @ (self.U[i, :r2] * self.U[j, :r2])

    @torch.no_grad()
    def interaction_strength(self) -> Float[Tensor, "d_sae d_sae"]:
        """S_ij = |λ2| ||B_ij||, for all pairs at once (the spec's interaction statistic)."""
        r2 = self.ranks[1]
        Ur = self.U[:, :r2]
        # ||C2 (u_i ⊙ u_j)||² = Σ_rs (u_ir u_is) G_rs (u_jr u_js) with G = C2ᵀC2: one [n, r2²] matmul
        X = (Ur[:, :, None] * Ur[:, None, :]).reshape(Ur.shape[0], -1)
        G = (self.C2.T @ self.C2).reshape(-1)
        return self.lambda2.abs() * ((X * G) @ X.T).clamp_min(0).sqrt()

    @torch.no_grad()
    def retract_(self) -> None:
        """U <- Q diag(sign(diag R)) from the reduced QR of U, so UᵀU = I (skipped when U ~ 0)."""
        U = self.U.data
        norm = float(U.norm())
        if norm < 1e-6:
            return
        if norm < 1e-4:
            U = U + 1e-6 * torch.randn_like(U)
        Q, R = torch.linalg.qr(U.float())
        sign = torch.sign(torch.diagonal(R))
        sign[sign == 0] = 1
        self.U.data.copy_((Q * sign).to(U.dtype))

    def training_forward_pass(self, step_input):  # type: ignore[no-untyped-def]
        if self.cfg.retract:
            self.retract_()
        return super().training_forward_pass(step_input)

    def calculate_aux_loss(self, step_input, feature_acts, hidden_pre, sae_out):  # type: ignore[no-untyped-def]
        losses = as_loss_dict(super().calculate_aux_loss(step_input, feature_acts, hidden_pre, sae_out))
        if "auxiliary_reconstruction_loss" in losses:  # TopK-family AuxK: redo it through the polynomial decoder
            losses["auxiliary_reconstruction_loss"] = self._auxk(step_input, sae_out, hidden_pre)
        if "l1_loss" in losses:  # ReLU base: weight the L1 by the linear atoms' norms instead of W_dec's
            w = self.linear_atoms().norm(dim=-1)
            losses["l1_loss"] = (
                step_input.coefficients["l1"] * (feature_acts * w).norm(p=self.cfg.lp_norm, dim=-1)
            ).mean()
        return losses

    def _auxk(self, step_input, sae_out: Tensor, hidden_pre: Tensor) -> Tensor:  # type: ignore[no-untyped-def]
        dead = step_input.dead_neuron_mask
        if dead is None or (n_dead := int(dead.sum())) == 0:
            return sae_out.new_zeros(())
        residual = (step_input.sae_in - sae_out).detach()
        k_aux = step_input.sae_in.shape[-1] // 2
        acts = calculate_topk_aux_acts(min(k_aux, n_dead), hidden_pre, dead)
        style = getattr(self.cfg, "auxk_style", "sae_lens")  # the BatchTopK base carries the official style
        return auxk_loss(style, self.cfg.aux_loss_coefficient, residual, self.poly_terms(acts), n_dead, k_aux)

    def process_state_dict_for_saving(self, state_dict: dict[str, Any]) -> None:
        super().process_state_dict_for_saving(state_dict)
        if self.cfg.retract:
            self.retract_()
            state_dict["U"] = self.U.detach().clone()
        with torch.no_grad():
            A = self.linear_atoms()
            state_dict["W_dec"] = A / A.norm(dim=-1, keepdim=True).clamp_min(1e-8)

    def process_state_dict_for_saving_inference(self, state_dict: dict[str, Any]) -> None:
        self.process_state_dict_for_saving(state_dict)  # the inference model is this class itself

    def get_W_dec_norm(self) -> Tensor:
        return self.linear_atoms().detach().norm(dim=-1).clamp(min=1e-8)

    @torch.no_grad()
    def fold_activation_norm_scaling_factor(self, scaling_factor: float) -> None:
        """Trained on s·x: the encoder takes x directly after W_enc *= s; the decoder's output and
        b_dec are divided by s (all three C's and b_dec, since x̂ is linear in them)."""
        self.W_enc.data *= scaling_factor
        for p in (self.C1, self.C2, self.C3, self.b_dec):
            p.data /= scaling_factor
        if hasattr(self, "topk_threshold") and self.cfg.rescale_acts_by_decoder_norm:
            self.topk_threshold /= scaling_factor

    def fold_W_dec_norm(self) -> None:
        raise NotImplementedError("PolySAE has a non-linear decoder: its decoder norm cannot be folded")


def _make(base: str, name: str) -> tuple[type, type]:
    extra: dict[str, Any] = {}
    if base in ("topk", "batchtopk"):
        extra["__annotations__"] = {"rescale_acts_by_decoder_norm": bool}
        extra["rescale_acts_by_decoder_norm"] = False  # the paper's `--no_rescale_by_decoder_norm`
    if base == "batchtopk":
        extra["get_inference_config_class"] = lambda self: type(self)
    return make_variant(name, base, PolyMixin, PolyFields, "_check_poly", "Poly", extra_cfg=extra, loss_only=False)


PolyTopKSAE, PolyTopKConfig = _make("topk", "poly")
PolyBatchTopKSAE, PolyBatchTopKConfig = _make("batchtopk", "poly_batchtopk")
PolyReLUSAE, PolyReLUConfig = _make("relu", "poly_relu")
