"""Pure functions from run data to Plotly figures, with alt text and a data-table alternative.

No Streamlit, no torch. Every chart speaks one language (`style`): a run is coloured by its
effective batch size from a colour-blind-safe palette keyed by log2(batch), so "batch 256" looks
the same on every page; a run whose colour another already holds takes a spare one, with its
own marker and dash; every pair drawn together passes `vision`'s colour-vision check.

    style.py   the chart language: colours, run styles, smoothing, robust y-range, end marks
    draft.py   a figure drawn as plain dicts (style's Draft)
    vision.py  colour differences under simulated protanopia, deuteranopia and tritanopia
    curves.py  a run's curves: loss; a comparison's loss (runtraces.py: what every curve shares)
    measures.py  a run's per-step throughput, memory and utilisation
    sweeps.py  quantities against batch size (a sweep's points; batchaxis.py their shared axis)
    sweepmemory.py  a memory sweep's breakdown, and the finder's probes
    batchstats.py  the normalisation grid, the gradient noise and the critical batch
    tables.py  runs as rows
    grid.py    the batch x learning-rate heat map
    paths.py   SGD paths over a two-parameter loss surface (bsdemo.toy)
    sharpness.py  a sharpness study: loss to the target, sharpness against 2/lr, the slice
    fitbatch.py   the largest batch each technique fits under a memory budget
    architectures.py  each architecture's samples/s, memory and quality against the batch
    gan.py        a GAN run's generated images and Fréchet distance (the Training Lab)
    regions.py    decision regions of runs on a 2-D dataset, side by side (the Training Lab)
    profile.py    a profiled step's timeline per batch, its fixed/growing split, the overhead cut
    parallel.py   a data-parallel step against one process's; a pipeline's bubble and memory
    accumulation.py  accumulated gradients against one big batch's, per parameter tensor
    sketches.py   Home's card pictures: the shape of each lesson's main chart as SVG, no data
"""

from bsdemo.charts.accumulation import accumulation_chart
from bsdemo.charts.architectures import architecture_charts, architecture_table
from bsdemo.charts.batchstats import critical_chart, noise_charts, norms_chart, norms_table
from bsdemo.charts.curves import (
    has_utilization,
    labelled_loss_chart,
    loss_chart,
    memory_chart,
    run_label,
    throughput_chart,
    utilization_chart,
)
from bsdemo.charts.fitbatch import fit_chart
from bsdemo.charts.grid import lr_grid_chart
from bsdemo.charts.parallel import ddp_chart, pipeline_chart, pipeline_memory_chart
from bsdemo.charts.paths import paths_chart
from bsdemo.charts.profile import cut_chart, profile_split_chart, profile_timeline_chart
from bsdemo.charts.sharpness import live_curves, sharpness_charts, sharpness_table
from bsdemo.charts.style import (
    BATCH_PALETTE,
    OKABE_ITO,
    OOM_COLOUR,
    X_AXES,
    Chart,
    batch_colour,
    ema,
    fit_legend,
    projector,
    styles,
)
from bsdemo.charts.sweeps import (
    BREAKDOWN,
    finder_chart,
    memory_breakdown_chart,
    sweep_epoch_time_chart,
    sweep_step_time_chart,
    sweep_throughput_chart,
    sweep_utilisation_chart,
)
from bsdemo.charts.tables import (
    comparison_table,
    for_people,
    probe_table,
    runs_table,
    throughput_table,
)
from bsdemo.recipes import best_lr_per_batch

__all__ = [
    "BATCH_PALETTE",
    "BREAKDOWN",
    "OKABE_ITO",
    "OOM_COLOUR",
    "X_AXES",
    "Chart",
    "accumulation_chart",
    "architecture_charts",
    "architecture_table",
    "cut_chart",
    "ddp_chart",
    "finder_chart",
    "pipeline_chart",
    "profile_split_chart",
    "profile_timeline_chart",
    "pipeline_memory_chart",
    "batch_colour",
    "best_lr_per_batch",
    "critical_chart",
    "fit_chart",
    "comparison_table",
    "ema",
    "probe_table",
    "throughput_table",
    "fit_legend",
    "projector",
    "for_people",
    "has_utilization",
    "labelled_loss_chart",
    "loss_chart",
    "lr_grid_chart",
    "memory_breakdown_chart",
    "memory_chart",
    "noise_charts",
    "norms_chart",
    "norms_table",
    "paths_chart",
    "run_label",
    "runs_table",
    "live_curves",
    "sharpness_charts",
    "sharpness_table",
    "styles",
    "sweep_epoch_time_chart",
    "sweep_step_time_chart",
    "sweep_throughput_chart",
    "sweep_utilisation_chart",
    "throughput_chart",
    "utilization_chart",
]
