"""The OTree layout (issue 16): multi-dimensional cubes and sampling by weight (Qbeast)."""
