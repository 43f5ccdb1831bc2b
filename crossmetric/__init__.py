"""crossmetric: metric learning between two modalities, and within one, from pairs.

Learners share one pair API (``fit(pairs, y)``, ``pair_distance``, ``cross_distance``,
``transform_x`` / ``transform_y``, ``calibrate_threshold``); see the README.
"""

__version__ = "0.1.0"

from crossmetric.baselines import Euclidean  # noqa: E402
from crossmetric.pairs import make_pairs  # noqa: E402

__all__ = ["Euclidean", "make_pairs", "__version__"]
