"""Quality control: gold labels, and labelers measured against them.

- ``questions``: making a solution a quality-control question (its gold label), and serving
  the questions in each generation;
- ``scoring``: every other label of such a solution (an *answer*) compared with the gold
  label, per labeler, question or generation;
- ``review``: what the admin's quality-control page lists and does.
"""
