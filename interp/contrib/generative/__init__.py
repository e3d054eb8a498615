"""interp.contrib.generative: stochastic binary coding (SBC), timestep rescheduling for DDIM inversion (TRDI),
information in diffusion models (DiffInfo)."""
