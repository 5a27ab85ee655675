"""Plotly figures of runs' metrics: what the Live, Compare and Sweep pages draw.

Figures are built here, from stored metrics and events, so that the pages stay thin and
the cost of a refresh can be measured without a browser (`make bench`; the figures are in
bench/results.md). Every series is downsampled to `series.CHART_BUCKETS` buckets, each
drawn as its lowest and highest point, so that spikes show. Every chart

- writes numbers one way: ticks as `TICK_FORMAT` (0.001, 0.25, 1e+6), hover values as
  `HOVER_FORMAT`, shares (accuracy, sparsity) in percent; log axes label whole decades;
- takes its y range from where most points lie (`series.robust_range`), so that a run
  that diverges leaves the top of the chart instead of flattening the others; reference
  lines (the radius, the clip threshold, 2/η) always stay in view;
- marks every live knob change and divergence of the runs it draws with a dotted line and
  a marker at the top that says what happened on hover;
- keeps a fixed `uirevision`, so that a user's zoom survives refreshes.

Per-layer charts are drawn once per run when several runs are shown (keys `<chart>/<run
id>`), all on the same y range, so that the small charts compare at a glance.

Modules, each importing only those before it: `style` (colours, formats), `traces` (one
run's lines, `RunView`), `marks` (knob changes and divergences), `layout` (one figure and
the layout all share), `drawing` (`Chart`, every run's figures); then the figures:
`training` (the Live panels), `instruments` (the Instruments panel, drawn from what each
instrument declares), `analysis` (range test, landscape, groups), `hyperparameters`
(parallel coordinates) and `sweep_analysis` (a sweep's views: Optuna's plots restyled,
importances with intervals, learning curves).
"""

from core.charts.analysis import group_figure, heatmap_figure, landscape_figures, range_test_figure
from core.charts.drawing import Chart
from core.charts.hyperparameters import hyperparameter_figure
from core.charts.instruments import (
    DISTANCE_FROM_INIT,
    INSTRUMENT_HELP,
    instrument_charts,
    instrument_figures,
)
from core.charts.layout import LEGEND, NO_DATA
from core.charts.marks import MARK_STYLES, Mark
from core.charts.style import (
    DASHES,
    HOVER_FORMAT,
    PALETTE,
    PERCENT_HOVER_FORMAT,
    PERCENT_TICK_FORMAT,
    REFERENCE,
    STEP_HOVER_FORMAT,
    TICK_FORMAT,
    TOTAL_COLOUR,
    ColourBook,
)
from core.charts.traces import RunView, Traces
from core.charts.training_panels import (
    CHECKPOINTS,
    layer_figures,
    live_figures,
    training_figures,
)
from core.training.instruments.specs import Scale

__all__ = [
    "CHECKPOINTS",
    "DASHES",
    "DISTANCE_FROM_INIT",
    "HOVER_FORMAT",
    "INSTRUMENT_HELP",
    "LEGEND",
    "MARK_STYLES",
    "NO_DATA",
    "PALETTE",
    "PERCENT_HOVER_FORMAT",
    "PERCENT_TICK_FORMAT",
    "REFERENCE",
    "STEP_HOVER_FORMAT",
    "TICK_FORMAT",
    "TOTAL_COLOUR",
    "Chart",
    "ColourBook",
    "Mark",
    "RunView",
    "Scale",
    "Traces",
    "group_figure",
    "heatmap_figure",
    "hyperparameter_figure",
    "instrument_charts",
    "instrument_figures",
    "landscape_figures",
    "layer_figures",
    "live_figures",
    "range_test_figure",
    "training_figures",
]
