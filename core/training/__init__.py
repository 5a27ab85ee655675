"""One run's training on TensorFlow: its config, data order, model heads and losses, the
instrumented traced step (`trainer`), its telemetry and instruments, precision and
distribution strategy.

It knows nothing of the store or of the run service above it (`core.engine`, which starts,
steers and records runs): `make lint` holds it to that. Importing this package imports
nothing; its modules that build a model import TensorFlow.
"""
