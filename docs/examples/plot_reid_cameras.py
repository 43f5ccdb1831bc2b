"""
Re-identification across two cameras (VIPeR)
============================================

VIPeR has 632 persons, each seen once by camera A and once by camera B. This example reads the
images from ``../shared/data/viper`` (the data folder beside the repository), describes them
with LOMO (the re-id descriptor of Liao et al., CVPR 2015), learns a metric on the images of
316 persons and ranks the other 316: every camera-A image queries a gallery of all test
images of both cameras. With camera ids, :func:`crossmetric.metrics.evaluate_rank` follows the
Market-1501 / torchreid protocol -- gallery items of the query's own identity *and* camera are
left out of its ranking -- and returns the CMC, mAP and mINP.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from crossmetric import KISSME, PCCA, make_pairs
from crossmetric.datasets import load_viper
from crossmetric.features import LOMO
from crossmetric.metrics import evaluate_rank, re_ranking
from crossmetric.plotting import plot_cmc

# The gallery runs in docs/examples: ../shared/data seen from the repository root.
DATA = Path("../../../shared/data")
viper = load_viper(DATA)  # images (1264, 128, 48, 3), ids, domains (camera 1 = A, 2 = B)
print(viper.images.shape, "persons:", len(np.unique(viper.ids)))

fig, axes = plt.subplots(1, 6, figsize=(6, 2.6))
for k, ax in enumerate(axes):
    ax.imshow(viper.images[k])
    ax.set_title(f"id {viper.ids[k]}, cam {'AB'[viper.domains[k] - 1]}", fontsize=7)
    ax.axis("off")

# %%
# Descriptors and a split by persons
# ----------------------------------
# LOMO gives 26,960 features per image; a PCA fitted on the training persons' images of both
# cameras keeps 100 of them.

features = LOMO().fit_transform(viper.images)
rng = np.random.RandomState(0)
persons = rng.permutation(np.unique(viper.ids))
is_train = np.isin(viper.ids, persons[:316])
pca = PCA(100, random_state=0).fit(features[is_train])
X = pca.transform(features)
ids, cams = viper.ids, viper.domains

# %%
# Single-modal learners on both cameras
# -------------------------------------
# Pairs are drawn from the training persons' identities: every same-person pair and ten
# different-person pairs for each.

train = np.flatnonzero(is_train)
pairs, y = make_pairs(ids[train], n_negatives=10, random_state=0)
models = {
    "KISSME": KISSME().set_params(preprocessor=X[train]).fit(pairs, y),
    "PCCA": PCCA(random_state=0, preprocessor=X[train]).fit(pairs, y),
}

# %%
# Ranking with camera ids
# -----------------------
# Queries: the test persons' camera-A images. Gallery: every test image. The query itself
# (same identity, same camera) is left out; its camera-B image is the match to find.

test = np.flatnonzero(~is_train)
query = test[cams[test] == 1]
curves = {}
for name, model in models.items():
    D = model.cross_distance(X[query], X[test])
    result = evaluate_rank(D, ids[query], ids[test], cams[query], cams[test], max_rank=20)
    curves[name] = result["cmc"]
    print(f"{name:20s} rank-1 {100 * result['cmc'][0]:5.1f} %  mAP {100 * result['map']:5.1f} %"
          f"  mINP {100 * result['minp']:5.1f} %")

# Euclidean distance on the same PCA features: the untrained floor
E = ((X[query][:, None, :] - X[test][None, :, :]) ** 2).sum(-1)
base = evaluate_rank(E, ids[query], ids[test], cams[query], cams[test], max_rank=20)
curves["Euclidean"] = base["cmc"]
print(f"{'Euclidean':20s} rank-1 {100 * base['cmc'][0]:5.1f} %  mAP {100 * base['map']:5.1f} %")

# %%
# k-reciprocal re-ranking
# -----------------------
# :func:`crossmetric.metrics.re_ranking` (Zhong et al., CVPR 2017) re-ranks with the
# query-query and gallery-gallery distances of the same model. It draws on the neighbours of a
# query's neighbours; with one true match per query and a few hundred persons it has little
# to work with, and here it costs rank-1 -- measure it on held-out persons before using it.

kissme = models["KISSME"]
q_g = kissme.cross_distance(X[query], X[test])
q_q = kissme.cross_distance(X[query], X[query])
g_g = kissme.cross_distance(X[test], X[test])
reranked = re_ranking(q_g, q_q, g_g)
result = evaluate_rank(reranked, ids[query], ids[test], cams[query], cams[test], max_rank=20)
curves["KISSME, re-ranked"] = result["cmc"]
print(f"{'KISSME, re-ranked':20s} rank-1 {100 * result['cmc'][0]:5.1f} %  "
      f"mAP {100 * result['map']:5.1f} %")

fig = plot_cmc(curves, title="VIPeR, 316 test persons: camera A → both cameras")
