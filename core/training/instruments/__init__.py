"""Instruments: measurements that say whether the optimizer is doing well, not only that
something changes. After Cockpit (Schneider, Dangel & Hennig, NeurIPS 2021), for Keras.

Each instrument is a class in a module of its own (`Instrument`, in `instrument`); its maths
are pure functions in `measures`; its charts are plain data (`specs`) that `core.charts`
draws. A new instrument is one module, its line in `INSTRUMENTS` and its typed
`{name}_every` attribute in `RunConfig`: the interval field's range and help, the default
interval, the charts and their captions come from its class. Importing this package
imports neither TensorFlow nor a plotting library.
"""

from core.training.instruments.alpha import Alpha
from core.training.instruments.histogram import Histogram
from core.training.instruments.instrument import Instrument, Measurements, ReplicaStep
from core.training.instruments.measures import (
    alpha,
    dot,
    histogram_edges,
    magnitude_histogram,
    noise_scale_terms,
    power_iteration,
)
from core.training.instruments.noise_scale import NoiseScale
from core.training.instruments.sharpness import Sharpness
from core.training.instruments.specs import ChartSpec, HeatStrip, Line, LineChart, Reference

INSTRUMENTS: dict[str, type[Instrument]] = {
    cls.name: cls for cls in (Alpha, Sharpness, NoiseScale, Histogram)
}

__all__ = [
    "INSTRUMENTS",
    "ChartSpec",
    "HeatStrip",
    "Instrument",
    "Line",
    "LineChart",
    "Measurements",
    "Reference",
    "ReplicaStep",
    "alpha",
    "dot",
    "histogram_edges",
    "magnitude_histogram",
    "noise_scale_terms",
    "power_iteration",
]
