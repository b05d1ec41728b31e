"""The concatenation models (Tiedemann & Scherrer, 2017): ``transformer_context_concat`` reads the
document's previous source sentences before the current one and its previous translations as a
forced decoder prefix (``model.py``); a lane carries those sentences (``systems/previous_sentences.py``).
"""
