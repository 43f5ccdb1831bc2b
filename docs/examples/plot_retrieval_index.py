"""
Searching a learned space with faiss
====================================

A fitted learner maps samples into a space where its distance is the ℓ2 distance:
:class:`crossmetric.retrieval.Index` puts a faiss index on that embedding. Queries go through
``transform_x`` and the database through ``transform_y``, so a cross-modal model searches one
modality with the other. ``range_search`` uses the model's calibrated ``threshold_`` as the
radius: an empty result means "not in the gallery". The index file holds the model without its
training data, and loads without running code from the file.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from crossmetric import CMML, make_pairs
from crossmetric.datasets import load_digits_views
from crossmetric.retrieval import Index

data = load_digits_views()
train, base, queries = slice(0, 900), slice(900, 1700), slice(1700, None)
pairs, y = make_pairs(data.labels[train], data.labels[train], max_positives=2000,
                      random_state=0)
model = CMML(n_components=30, random_state=0,
             preprocessor=(data.X[train], data.Y[train])).fit(pairs, y)

# %%
# An inverted-file index on the sketches, queried with photos
# -----------------------------------------------------------

index = Index(model, kind="ivf", nlist=16, nprobe=4, random_state=0).add(data.Y[base])
dist, ids = index.search(data.X[queries], k=10)  # squared ℓ2 in the learned space
hits = data.labels[base][ids] == data.labels[queries][:, None]
print("ids:", ids.shape, "| precision@10 (same digit):", round(float(hits.mean()), 3))

exact = Index(model, kind="flat").add(data.Y[base])
_, exact_ids = exact.search(data.X[queries], k=10)
recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, exact_ids, strict=True)])
print("recall of the exact top-10 with nprobe=4:", round(float(recall), 3))

# %%
# Open-set search and a saved index
# ---------------------------------

lims, d, found = index.range_search(data.X[queries])
print("queries with at least one item within threshold_:", int(np.sum(np.diff(lims) > 0)),
      "of", len(lims) - 1)
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "sketches.index"
    index.save(path)
    again = Index.load(path)
    assert np.array_equal(again.search(data.X[queries], k=10)[1], ids)

fig, axes = plt.subplots(2, 6, figsize=(6, 2.4))
for row, q in enumerate((0, 1)):
    axes[row, 0].imshow(data.images_x[1700 + q], cmap="gray")
    axes[row, 0].set_title("query", fontsize=7)
    for col in range(5):
        axes[row, col + 1].imshow(data.images_y[900 + ids[q, col]], cmap="gray")
        axes[row, col + 1].set_title(f"#{col + 1}", fontsize=7)
for ax in axes.ravel():
    ax.axis("off")
fig.suptitle("photo queries, their nearest sketches", fontsize=8)
