"""Helpers every layer uses: argument checks, atomic file writes, array-file checks, BLAS
thread limits, a cache of repeated deterministic computations."""
