"""Optimizer Lab's benchmarks: the lab measured against plain Keras, on this machine.

`make bench` (`python -m bench`) measures every figure of `bench.figures.FIGURES`, prints
one table row per figure (A, B, their ratio, the target, whether it is met) and writes the
table, with a description of the machine, to `bench/results.md`. Comparisons are measured
interleaved, A B A B …, and summarized by medians (`bench.timing`); a missed target is
explained from a profile (`bench.profiling`).

Modules: `figures` (the list of figures and their targets), `timing`, `rows` (what a figure
reports), `report` (the table and the results file), `machine`; one module per group of
figures: `training` (1, 2, 7), `optimizer_step` (3, 4), `dashboard` (5), `storage` (6);
and their helpers `step_clock`, `sampler`, `profiling`, `article`, `synthetic`.
"""
