"""Security: function-secret-sharing nonlinearities for two-server inference (FuseFSS), and benign
red-teaming loops on local toys (MultiBreak, OrchJail)."""
