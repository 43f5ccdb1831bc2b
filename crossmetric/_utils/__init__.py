"""Helpers every layer uses: argument checks, atomic file writes, array-file checks."""
