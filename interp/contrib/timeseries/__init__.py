"""interp.contrib.timeseries: reservoir computing with a parallel scan (ParalESN)."""
