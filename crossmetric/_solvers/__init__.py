"""How the parameters of the pair learners are found (no learner classes here).

==========================  ==================================================================
module                      what
==========================  ==================================================================
:mod:`.logistic`            the generalized-logistic pair objective on linear towers (PCCA,
                            CMML; LDML / CLML with a learned threshold)
:mod:`.descent`             full-batch L-BFGS and preconditioned gradient descent,
                            :func:`~.descent.solve`
:mod:`.towers`              the one PCCA / CMML dispatch: towers, solver, early stopping
:mod:`.starting`            starting points: tower weights, LDML's projection and bias
:mod:`.stochastic`          mini-batch solvers over pair blocks (samples may be memory-mapped)
:mod:`.epochs`              the one epoch loop (stochastic solvers, GSM)
:mod:`.stopping`            the plateau rules of the training objective: the full-batch
                            solvers' and CML-AUC's (best value over a window), the epochs'
                            patience and GSM's windowed means
:mod:`.optim`               the one NumPy Adam, and first-step-scaled SGD
:mod:`.early_stopping`      the one hold-out of whole identities and its monitor
:mod:`.proximal`            the PSD proximal step of the log-det regulariser (CML-AUC)
:mod:`.linalg`              closed forms: the span reduction, PCA of the used samples, CCA
:mod:`.gsm_tying`           GSM's parameter tying per structure, one function for NumPy
                            (``GSM``) and torch (``DeepGSM``)
==========================  ==================================================================
"""
