"""
Pairs in three forms, one model
===============================

A pair learner is fitted on constraints ``(pairs, y)``, ``y = +1`` for *same* and ``-1`` for
*different*. The pairs may come as indices into a ``preprocessor`` (memory-light, and what
``cross_val_score`` can split), as an array of shape ``(n_pairs, 2, n_features)`` (metric-learn's
form), or, for two modalities, as a tuple of row-aligned arrays ``(Xp, Yp)``. Before any learner
sees them, the base turns every form into the distinct samples and index pairs into them, so
the same constraints give the same model whatever their form.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from crossmetric import PCCA, make_pairs

X, labels = load_digits(return_X_y=True)
X = X / 16.0
train, test = slice(0, 900), slice(900, None)

# index pairs, as the papers draw them: every positive (capped here), one negative each
pairs, y = make_pairs(labels[train], max_positives=1000, random_state=0)
print(pairs.shape, np.unique(y, return_counts=True))

# %%
# The same constraints in the index form and in the array form
# ------------------------------------------------------------
# ``early_stopping=False`` runs the paper's plain optimisation, so that the comparison
# is about the input forms only.

settings = dict(n_components=16, early_stopping=False, random_state=0)
by_index = PCCA(preprocessor=X[train], **settings).fit(pairs, y)
as_arrays = PCCA(**settings).fit(X[train][pairs], y)  # shape (n_pairs, 2, 64)

test_pairs, test_y = make_pairs(labels[test], max_positives=1000, random_state=1)
d_index = by_index.pair_distance(X[test][test_pairs])
d_arrays = as_arrays.pair_distance(X[test][test_pairs])
print("largest difference of the learned distances:", float(np.max(np.abs(d_index - d_arrays))))
print("held-out ROC AUC:", round(as_arrays.score(X[test][test_pairs], test_y), 4))

# %%
# What the learned distance separates
# -----------------------------------
# ``predict`` says *same* where the distance is below ``threshold_``, which ``fit`` sets on
# the training pairs (PCCA: ``D² = 1``, the threshold of its loss).
# ``calibrate_threshold`` moves it using other pairs.

fig, ax = plt.subplots(figsize=(6, 3.5))
bins = np.linspace(0, np.percentile(d_arrays, 99), 40)
ax.hist(d_arrays[test_y == 1], bins=bins, alpha=0.6, label="same digit")
ax.hist(d_arrays[test_y == -1], bins=bins, alpha=0.6, label="different digits")
ax.axvline(as_arrays.threshold_, color="k", ls="--", label="threshold_")
ax.set_xlabel("learned squared distance (held-out pairs)")
ax.set_ylabel("pairs")
ax.legend()
fig.tight_layout()
