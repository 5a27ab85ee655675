"""Differentially private training (DP-SGD, Abadi et al. 2016): the accounting of the
privacy spent (`accounting`); the Poisson sampling of each step's batch (`sampling`); the
clipping of each example's gradient and the noise added to their sum (`clipping`).

Nothing here imports TensorFlow: the dashboard reads a run's privacy spent without it.
"""
