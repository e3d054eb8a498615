"""interp.contrib.timeseries: reservoir computing with a parallel scan (ParalESN), input-dependent Koopman forecasting
(KUMA-lite), an ELBO-trained social world model (SWM)."""
