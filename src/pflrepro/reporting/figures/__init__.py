"""Figures, one module per kind, each written as a PDF and a PNG (atomically, reproducibly).

=================  ==========================================  ==========================
module             draws                                       ``pflrepro plot`` kind
=================  ==========================================  ==========================
accuracy           weighted test accuracy against round        ``accuracy``
client_accuracy    one client's accuracy against round         ``client-accuracy``
weights            final-round weight heatmaps ``w_ij``        ``weights``
client_weights     one client's weights ``w_ij`` over rounds   ``client-weights``
distances          model distances, same vs other pairs        ``distances``
clusters           Clustered FL's cluster ids over rounds      ``clusters``
labels             each client's label distribution            ``labels``
gates              FedMix: each client's mean gate per expert  ``gates``
posterior          FedMix: q(z | y), classes x experts         ``posterior``
=================  ==========================================  ==========================

:mod:`.common` holds what they share: the style, the layout that fits every figure on
its canvas, saving, and picking the run a panel shows. Nothing is imported here, so
loading one kind loads only its module (and matplotlib).
"""
