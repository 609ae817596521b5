"""Torch-free recipes for the lessons: which runs a lesson trains, and what its results say.
Pages and the CLI build their runs here, so a page never re-creates one, and every closing text
is computed here from the runs (unit-tested on built results). comparisons.py: the regimes, the
lr rules; lrgrid.py: the lr grid; measurements.py: throughput, memory, accumulation, the finder; lab.py: the
Training Lab.

    regime_configs       SGD, full batch, mini-batch on one model, data, seed and epoch budget
    lr_variants          a reference batch and lr, the batch times k with the lr kept, x k, x sqrt(k),
                         and x k after a warm-up
    lr_grid              batch size x learning rate, a few epochs each
    best_lr_per_batch    the grid's best learning rate per batch (diverged cells never win)
    over_budget          the runs whose measured peak would not fit a memory budget
    regimes_verdict      what the three regimes' own results show, in words
    lr_verdict           what the lr comparison's rules did against the reference, and what
                         warm-up prevented (a blow-up, a loss spike) or that it had nothing to
    LR_PRESETS           the lr page's starting points: the linear rule, and warm-up's case
    lab_verdict          what the Training Lab's runs show: the newest, and the batch extremes
    accumulation_verdict whether accumulation matched one big batch: gradients, then parameters
    accumulation_why     why: each pitfall switched on, or what it cost in speed on this run
    layer_rows           the accumulation check's per-parameter table, named for people
    simulated_device     the finder's default memory budget on a CPU, sized to the model
    memory_verdict       what a memory sweep measured: the fixed part, the per-sample part, the
                         largest batch that ran, the prediction, and how far to trust the line
    throughput_verdict   what a sweep's fit, knee and peak share show, and how far to trust them
    contention           how busy other processes kept the CPU while a sweep measured
    best_lr_verdict      what the grid's best learning rates show, in words, against the rules
    rule_predictions     each batch's best lr by the linear and square-root rules
    lab_prediction, throughput_prediction, regimes_prediction, lr_prediction,
    memory_prediction, accumulation_prediction, finder_prediction
    noise_verdict        what a gradient-noise measurement shows: 1/B, B_simple two ways (noise.py)
    noise_prediction     what 4× the batch did to the gradient's variance
    fit_verdict          what fitting a bigger batch measured: each technique against fp32 in
                         batch, speed and result (fitbatch.py); fit_prediction: which fitted most
    shared_b_simple      the noise measurement's B_simple where it measured the critical study's
                         start: one value for one quantity on the page
    critical_verdict     steps to a target loss against the batch: the regimes, the critical
                         batch beside B_simple (noise.py)
    norms_verdict        what a normalisation grid shows: BatchNorm at tiny batches (norms.py)
    norms_prediction     which normalisation did worst at the smallest batch
    profile_verdict      where a profiled small batch's step went, the trace's fixed part against
                         t0, and what cutting the overhead bought (profile.py)
    sharpness_verdict    what a sharpness study shows: which minimum is sharper, the gap in
                         this run, the slice, 2/lr, each remedy (sharpness.py)
    sharpness_prediction which of the two solutions was sharper
                         which answer to a page's "Predict first" question the runs support,
                         with the numbers that show it (predictions.py)
    architecture_verdict each architecture's measured batch range beside the rule of thumb, and
                         why they differ (architectures.py)
    closing              a closing text's shape: a one-sentence takeaway, then the rest (split,
                         lead_problem, join); VERDICTS: every function here that writes one
    ddp_verdict, pipeline_verdict, cluster_prediction
                         a data-parallel check and a pipeline in words; a cluster's all-reduce
                         predicted from published link bandwidths (parallel.py)
"""

from bsdemo.recipes import closing
from bsdemo.recipes.architectures import architecture_verdict
from bsdemo.recipes.comparisons import (
    GRID_BATCHES,
    GRID_LRS,
    LR_PRESETS,
    SPIKE,
    best_lr_per_batch,
    best_lr_verdict,
    grid_cells,
    lr_grid,
    lr_variants,
    lr_verdict,
    over_budget,
    regime_configs,
    regime_label,
    regimes_verdict,
    rule_predictions,
)
from bsdemo.recipes.fitbatch import fit_prediction, fit_verdict
from bsdemo.recipes.lab import lab_verdict
from bsdemo.recipes.measurements import (
    CONTENDED,
    FINDER_DEVICE_BATCH,
    accumulation_verdict,
    accumulation_why,
    contention,
    finder_summary,
    finder_use,
    layer_rows,
    memory_verdict,
    simulated_device,
    throughput_verdict,
)
from bsdemo.recipes.noise import (
    critical_verdict,
    noise_prediction,
    noise_verdict,
    paths_verdict,
    shared_b_simple,
)
from bsdemo.recipes.norms import norms_prediction, norms_verdict
from bsdemo.recipes.parallel import cluster_prediction, ddp_verdict, pipeline_verdict
from bsdemo.recipes.predictions import (
    accumulation_prediction,
    doubling_trials,
    finder_prediction,
    lab_prediction,
    lr_prediction,
    memory_prediction,
    regimes_prediction,
    throughput_prediction,
)
from bsdemo.recipes.profile import profile_verdict
from bsdemo.recipes.sharpness import sharpness_prediction, sharpness_verdict

__all__ = [
    "CONTENDED",
    "FINDER_DEVICE_BATCH",
    "GRID_BATCHES",
    "GRID_LRS",
    "LR_PRESETS",
    "SPIKE",
    "accumulation_prediction",
    "architecture_verdict",
    "critical_verdict",
    "doubling_trials",
    "cluster_prediction",
    "ddp_verdict",
    "pipeline_verdict",
    "fit_prediction",
    "fit_verdict",
    "finder_prediction",
    "finder_summary",
    "finder_use",
    "noise_prediction",
    "noise_verdict",
    "shared_b_simple",
    "norms_prediction",
    "norms_verdict",
    "paths_verdict",
    "memory_prediction",
    "sharpness_prediction",
    "sharpness_verdict",
    "accumulation_verdict",
    "accumulation_why",
    "best_lr_per_batch",
    "best_lr_verdict",
    "contention",
    "grid_cells",
    "lab_prediction",
    "layer_rows",
    "lab_verdict",
    "lr_prediction",
    "regimes_prediction",
    "throughput_prediction",
    "lr_grid",
    "lr_variants",
    "lr_verdict",
    "profile_verdict",
    "memory_verdict",
    "over_budget",
    "regime_configs",
    "regime_label",
    "regimes_verdict",
    "rule_predictions",
    "simulated_device",
    "throughput_verdict",
    "closing",
    "VERDICTS",
]

# every closing text's writer: each leads with a takeaway sentence (closing.lead_problem)
VERDICTS = tuple(sorted(name for name in __all__ if name.endswith("_verdict")))
