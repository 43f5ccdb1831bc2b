"""
Starts and the held-out guard
=============================

With a few hundred identities whose same-identity pairs are all given (persons of a face,
sketch or re-id set), the papers' iterative learners hold out a seeded 20 % of the training
identities (``early_stopping="auto"``, the default). They score the possible starts there --
the untrained distance, the closed form (ridge CCA) and the paper's start -- train from the
best one, and keep the best check of training, or the start itself when training does not
beat it beyond the hold-out's noise. The model returned is never worse on held-out identities
than where it started. ``early_stopping=False`` is the paper's plain run.

Here 300 digits play the persons: each is one identity with one photo and one sketch.
"""

import matplotlib.pyplot as plt
import numpy as np

from crossmetric import CMML, make_pairs
from crossmetric.datasets import load_digits_views
from crossmetric.metrics import rank_accuracy

data = load_digits_views()
rng = np.random.RandomState(1)
order = rng.permutation(len(data.X))
train, test = order[:300], order[300:600]
pairs, y = make_pairs(data.instance[train], data.instance[train], n_negatives=10,
                      random_state=0)
views = (data.X[train], data.Y[train])

guarded = CMML(n_components=None, random_state=0, preprocessor=views).fit(pairs, y)
plain = CMML(n_components=None, init="random", early_stopping=False, random_state=0,
             preprocessor=views).fit(pairs, y)

# %%
# What the guard chose
# --------------------
# ``init_`` is the start it kept, ``best_iteration_`` the check it returned (0: the start),
# ``validation_scores_`` the held-out rank-1 of the start and of every check.

print("start kept:", guarded.init_, "| check returned:", guarded.best_iteration_)
for name, model in (("guarded (default)", guarded), ("paper's plain run", plain)):
    D = model.cross_distance(data.X[test], data.Y[test])
    r1 = rank_accuracy(D, data.instance[test], data.instance[test], rank=1)
    print(f"{name:18s} test rank-1 {100 * r1:5.1f} %  ({model.n_iter_} iterations)")

fig, ax = plt.subplots(figsize=(6, 3.5))
scores = np.asarray(guarded.validation_scores_)
ax.plot(np.arange(len(scores)), 100 * scores, marker="o")
ax.axvline(guarded.best_iteration_, color="k", ls="--", label="check kept")
ax.set_xlabel("check (0 = the start)")
ax.set_ylabel("held-out rank-1 (%)")
ax.set_title("CMML on 240 training identities, 60 held out")
ax.legend()
fig.tight_layout()
