"""
Photo → sketch matching on the embedded data
============================================

:func:`crossmetric.datasets.load_digits_views` gives every digit of scikit-learn's digits in two
modalities: ``X`` holds the pixels of a "photo", ``Y`` the HOG descriptor of a deformed
"sketch" of it (``images_x`` and ``images_y`` hold the pictures). Each row of ``X`` and ``Y``
shows the same object (``instance``). Here cross-modal learners are fitted on the photo-sketch
pairs of 600 objects and rank, for every photo of 300 other objects, their sketches: the
cumulative match characteristic (CMC) gives how often the true sketch is within the first r.
"""

import matplotlib.pyplot as plt
import numpy as np

from crossmetric import CCA, CMML, GSM, KCCA, make_pairs
from crossmetric.datasets import load_digits_views
from crossmetric.metrics import cmc
from crossmetric.plotting import plot_cmc

data = load_digits_views()
fig, axes = plt.subplots(1, 2, figsize=(4, 2.2))
pictures = (data.images_x[0], data.images_y[0])
for ax, image, name in zip(axes, pictures, data.view_names, strict=True):
    ax.imshow(image, cmap="gray")
    ax.set_title(name, fontsize=8)
    ax.axis("off")

# %%
# Pairs of objects, not of classes
# --------------------------------
# ``make_pairs(instance, instance)`` pairs each photo with the sketch of the same object
# (positives) and with 10 sketches of other objects (negatives).

rng = np.random.RandomState(0)
order = rng.permutation(len(data.X))
train, test = order[:600], order[600:900]
pairs, y = make_pairs(data.instance[train], data.instance[train], n_negatives=10,
                      random_state=0)
views = (data.X[train], data.Y[train])

models = {
    "CCA": CCA(n_components=20),
    "KCCA": KCCA(n_components=20, kernel="rbf"),
    "CMML": CMML(n_components=30, random_state=0),
    "GSM": GSM(random_state=0),
}
curves = {}
for name, model in models.items():
    model.set_params(preprocessor=views).fit(pairs, y)
    D = model.cross_distance(data.X[test], data.Y[test])  # (photos, sketches), in blocks
    curves[name] = cmc(D, data.instance[test], data.instance[test], max_rank=20)
    print(f"{name:6s} rank-1 {100 * curves[name][0]:5.1f} %   rank-10 "
          f"{100 * curves[name][9]:5.1f} %")

# %%
# The CMC curves
# --------------
# :func:`crossmetric.plotting.plot_cmc` keeps one colour per method in every figure and sorts
# the legend best first.

fig = plot_cmc(curves, title="digits: photo → sketch of the same object")
