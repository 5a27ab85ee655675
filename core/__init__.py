"""Optimizer Lab's engine: optimizers, data, models, training, runs and storage.

Nothing under `core` imports Streamlit; the dashboard (`app.py`, `pages/`) is a thin
client of this package, and so is the command line (`python -m core`).
"""
