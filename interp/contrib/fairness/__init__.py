"""Fair allocation: envy-freeness from noisy value queries (EF-NoisyQ), online allocation with
predictions (OnlineFair)."""
