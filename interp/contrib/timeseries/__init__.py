"""interp.contrib.timeseries: reservoir computing with a parallel scan (ParalESN), input-dependent Koopman forecasting (KUMA-lite)."""
