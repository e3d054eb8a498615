"""interp.contrib.data: label noise (GFD-EMVC), source screening (SourceScreen), privileged information (CoupledPI)."""
