"""The parts of :class:`crossmetric.retrieval.Index` (the public class lives there).

==========================  ==================================================================
module                      what
==========================  ==================================================================
:mod:`.embedding`           rows and queries through the model; batching, input checks
:mod:`.building`            the faiss structure, training, add / remove / reset
:mod:`.searching`           k-nearest search, re-ranking, CLML mixture lists, range search
:mod:`.storage`             save / load in crossmetric's safe format, old joblib files
==========================  ==================================================================

faiss itself is reached through :mod:`crossmetric.metrics._faiss_tools`.
"""
