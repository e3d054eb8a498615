"""The `interp` command line (typer)."""
