"""sae: SAE variants (C²R, PolySAE, coherence) as sae-lens architectures, their baselines, metrics,
training from an `interp` ActivationStore, transcoders (per-layer, skip, cross-layer) trained from a running
model, synthetic benchmarks and experiments (see sae/README.md).

Importing the package registers the architectures with sae-lens (`register_sae_class`,
`register_sae_training_class`), so sae-lens's trainer and loaders accept them.
"""

from sae.baselines import ARCHS, BASELINE_OF, UnknownArchitectureError, arch_name, load_sae, make_sae
from sae.c2r import c2r_loss
from sae.coherence import coh_loss, coh_terms
from sae.hooked_sae import HookedSAETransformer
from sae.inference import to_inference
from sae.polysae import PolyMixin
from sae.pretrained import check_compatible, from_pretrained
from sae.steer import ablate, spliced, steer
from sae.transcoder_folder import load_transcoders, write_transcoders

__all__ = [
    "ARCHS",
    "BASELINE_OF",
    "UnknownArchitectureError",
    "arch_name",
    "load_sae",
    "make_sae",
    "c2r_loss",
    "coh_loss",
    "coh_terms",
    "HookedSAETransformer",
    "PolyMixin",
    "to_inference",
    "from_pretrained",
    "check_compatible",
    "steer",
    "ablate",
    "spliced",
    "load_transcoders",
    "write_transcoders",
]
