"""Training targets computed in numpy from the boxes of a sample (or a batch of samples)."""
