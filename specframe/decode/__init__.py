"""The decode loop: a request is a batch of one.

``request`` checks requests and shapes results, ``text`` turns tokens into text incrementally and finds stop
strings, ``noise`` keys every random draw by (request seed, absolute position), ``rounds`` advances every
in-flight row by one round, and ``loop`` runs continuous batching (``Pipeline.generate`` is one row).
"""
