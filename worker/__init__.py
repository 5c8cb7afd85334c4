"""The PRM worker: trains a process reward model on the step labels and scores solutions.

It may import ``app``; ``app`` never imports it (tests/test_layers.py guards this).
"""
