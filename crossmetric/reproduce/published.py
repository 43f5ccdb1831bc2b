"""Every published number the reproductions print beside ours, with its source."""

from __future__ import annotations

__all__ = ["PUBLISHED"]

#: Every published number used by the reproductions, with its source. Values in percent.
PUBLISHED: dict[str, dict] = {
    "pcca-viper": {
        "source": "Mignon & Jurie, PCCA, CVPR 2012, Table 2 (VIPeR CMC at rank r, mean of "
                  "10 splits; PRDC, MCC and ITML rows quoted by the paper from PRDC [33])",
        "measures": ("r1", "r5", "r10", "r20"),
        # (p, method, n⁻): (r = 1, 5, 10, 20)
        "rows": {
            (316, "PRDC", 1): (15.66, 38.42, 53.86, 70.09),
            (316, "MCC", 631): (15.19, 41.77, 57.59, 73.39),
            (316, "ITML", 631): (11.61, 31.39, 45.76, 63.86),
            (316, "PCCA-sqrt", 1): (13.48, 34.84, 49.43, 67.18),
            (316, "PCCA-chi2", 1): (13.67, 35.22, 49.93, 68.20),
            (316, "PCCA-chi2RBF", 1): (17.02, 43.26, 58.67, 76.36),
            (316, "PCCA-sqrt", 10): (17.28, 42.41, 56.68, 74.53),
            (316, "PCCA-chi2", 10): (17.28, 43.64, 59.68, 76.04),
            (316, "PCCA-chi2RBF", 10): (19.27, 48.89, 64.91, 80.28),
            (532, "PRDC", 1): (9.12, 24.19, 34.40, 48.55),
            (532, "MCC", 199): (5.00, 16.32, 25.92, 39.64),
            (532, "ITML", 199): (4.19, 11.11, 17.22, 24.59),
            (532, "PCCA-sqrt", 1): (7.34, 21.02, 31.30, 45.37),
            (532, "PCCA-chi2", 1): (7.03, 20.32, 30.86, 45.71),
            (532, "PCCA-chi2RBF", 1): (7.61, 22.42, 33.40, 48.42),
            (532, "PCCA-sqrt", 10): (8.44, 24.34, 35.62, 50.07),
            (532, "PCCA-chi2", 10): (7.95, 24.23, 35.73, 50.45),
            (532, "PCCA-chi2RBF", 10): (9.27, 24.89, 37.43, 52.89),
        },
    },
    "pcca-viper-negatives": {
        "source": "Mignon & Jurie, PCCA, CVPR 2012, Fig. 6 (CMC@20 of PCCA-chi2RBF vs n⁻); the "
                  "figure prints no values, only its n⁻ = 1 and 10 points are in Table 2",
        "measures": ("r20",),
        # (p, n⁻): r = 20
        "rows": {(316, 1): 76.36, (316, 10): 80.28, (532, 1): 48.42, (532, 10): 52.89},
    },
    "pcca-viper-convergence": {
        "source": "Mignon & Jurie, PCCA, CVPR 2012, Fig. 3 and §3.3: without preconditioning "
                  "convergence is 'roughly 10 times slower' (no values printed)",
        "slowdown": 10.0,
    },
    "pku-sketch": {
        "source": "none of the five papers reports PKU-Sketch; no published numbers are used",
        "rows": {},
    },
    "cml-auc-cufs": {
        "source": "Huo et al., CML-AUC, TNNLS 2018, Tables I-II on CUFSF (700 / 494 persons, "
                  "dense SIFT + PCA-800 for CML_AUC/pAUC; mean of 10 splits) -- CUFSF's, shown "
                  "as the reference: ours run on CUFS, its public stand-in",
        "measures": ("1-EER", "VR@0.1%", "AUC", "rank-1"),
        # method: (1-EER %, VR@FPR=0.1 %, AUC, rank-1 %); single-modal rows on original
        # features (Table I's first rows), cross-modal rows from Table II
        "rows": {
            "PCA": (85.5, 25.9, 0.936, 35.0), "LMNN": (93.3, 34.7, 0.981, 55.0),
            "NCA": (95.1, 42.6, 0.989, 59.1), "ITML": (91.4, 34.8, 0.974, 41.4),
            "LDML": (94.3, 42.9, 0.986, 59.8), "Maha_AUC": (95.8, 55.6, 0.991, 67.4),
            "CSR": (95.1, 51.9, 0.989, 63.7), "KCSR": (96.0, 39.5, 0.991, 66.8),
            "CCA": (93.6, 37.2, 0.983, 48.7), "KCCA": (95.2, 41.3, 0.990, 57.4),
            "CDFE": (91.8, 15.9, 0.974, 48.6), "MvDA": (90.7, 27.7, 0.967, 36.0),
            "CMML": (94.1, 43.7, 0.986, 61.2), "CML_AUC": (96.3, 58.0, 0.994, 73.6),
            "CML_pAUC": (96.5, 59.7, 0.995, 75.5),
        },
    },
    "gsm-cufs": {
        "source": "Lin et al., GSM (deep generalized similarity), Table II: sketch -> photo "
                  "recognition rate on CUFS's CUHK-student part (88 training / 100 test "
                  "persons; that part is not in our copy) -- shown as the reference: ours run "
                  "on the AR + XM2VTS parts, 180 / 238 persons",
        "measures": ("rank-1",),
        # method: recognition rate (rank-1 %); "GSM (deep)" is the paper's "Ours"
        "rows": {"ET": 71.0, "MRF": 96.0, "MRF+": 99.0, "GSM (deep)": 100.0},
    },
    "cmml-cufs": {
        "source": "Mignon & Jurie, CMML, ACCV 2012, Figs. 6-7 on CUFSF (500 / 360 persons, "
                  "LTP descriptors, chi2-RBF kernel versions of every method); the paper "
                  "prints no values (the text describes the curves) and our copy has no "
                  "figure images, so nothing is read off the figures: only the claims below "
                  "are checked",
        "rows": {},
        # the curves' shape as the text states it (§4.2, 'Results on CUFSF')
        "claims": (
            "Fig. 6: CMML outperforms CCA, PLS and CDFE by a large margin (n- = 1)",
            "Fig. 6: CMML's nearest-neighbour accuracy saturates around 70 dimensions; its "
            "accuracy at EER stays roughly the same over the dimensions",
            "Fig. 7: n- = 1 gives the best results; the drop with more negatives grows with "
            "the latent dimension",
        ),
    },
    "gsm-cuhk01": {
        "source": "Lin et al., GSM (Cross-domain visual matching via generalized similarity "
                  "measure and feature learning), CUHK01 871 / 100 persons, single shot, 10 "
                  "splits: Fig. 6(b) hand-crafted features (CMC curves only); the text of "
                  "§5.5 gives the generalized similarity's rank-1 on them, 39.5 %",
        "rows": {"Generalized": {"r1": 39.5}},
        "notes": {"Generalized": "paper r1 from §5.5 text ('from 66.5% to 39.5% on CUHK01')",
                  "special case": "Fig. 6(b) has no special cases (they are in Fig. 6(c)-(f), "
                                  "deep features, not CUHK01); run here on the hand-crafted "
                                  "features"},
    },
    "gsm-cuhk01-deep": {
        "source": "Lin et al., GSM, Fig. 4(b) and §5.2: DeepGSM on CUHK01 images, 871 / 100 "
                  "persons, rank-1 66.50 % (the other ranks are in the figure only)",
        "rows": {"DeepGSM": {"r1": 66.50}},
        "notes": {},
    },
}
