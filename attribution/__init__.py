"""attribution: method family on the interp public API (see README)."""
