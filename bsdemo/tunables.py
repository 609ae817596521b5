"""The engine's tunables, in one place: how long each measurement runs, how much it samples, and
the most a job may ask for. The engine's functions take their defaults from here, the job kinds'
option checks and cost bounds (bsdemo.jobkinds) read the same names, and nothing copies a value
as a literal. Pure Python (no torch): the server reads it before a worker ever starts.

Change a value here and every layer sees it; bench/ shows what each one costs.
"""

from __future__ import annotations

# ----- a sweep (bsdemo.engine.sweep): each batch size timed in rounds -----
SWEEP_WARMUP_STEPS = 3  # untimed, before a point's first round: allocator, kernel selection
# untimed, before each later round (a fresh model's first step counts what autograd saves, so it
# is slower)
SWEEP_ROUND_WARMUP_STEPS = 1
SWEEP_TIMED_STEPS = 8  # at least this many steps are timed per point, over all its rounds
# ... and they last at least this long: eight 0.3 ms steps are one scheduler hiccup away from a
# wrong point (repeat sweeps on a shared 2-core VM disagreed by up to 24% per point without it)
SWEEP_MIN_TIMED_S = 0.15
SWEEP_ROUNDS = 3  # every point is measured in this many rounds, in a shuffled order each
MAX_TIMED_STEPS = 2000  # a sweep point's timed steps, whatever its minimum duration asks
MAX_SWEEP_POINTS = 64
MAX_SWEEP_ROUNDS = 10  # a sweep point's rounds (a noisy one gets up to twice as many)

# ----- a profile (bsdemo.engine.profile): per batch size, warm-up steps, then the profiled
# steps; unprofiled steps of the same loop before and after; the overhead cut's alternating
# blocks -----
PROFILE_WARMUP = 3
PROFILE_STEPS = 10  # the faster half of them is read
MAX_PROFILE_STEPS = 20
MAX_PROFILE_SIZES = 4
PROFILE_PLAIN_STEPS = 20
PROFILE_CUT_STEPS = 20
PROFILE_CUT_BLOCKS = 4

# ----- the finder (bsdemo.engine.finder) -----
FIND_PROBES = (8, 32)  # small enough to fit nearly anywhere, far enough apart for a slope
FIND_BISECT_TOLERANCE = 0.05  # stop bisecting when the bracket is within 5% of its lower end
FIND_WARMUP_STEPS = 1  # untimed, before each probe's timed steps
FIND_TIMED_STEPS = 3
FIND_MAX_PROBES = 64  # two probes, halvings, a verification and a bisection: far fewer in practice
# a probe's most steps: its warm-up, then its timed steps with room for partial batches
FIND_STEPS_PER_PROBE = FIND_WARMUP_STEPS + 2 * FIND_TIMED_STEPS + 1
# the finder's recommendation: samples/s of this many sizes that fit, timed in rounds as a sweep
# times its points (at least this many steps each, no minimum duration: a bounded cost)
FIND_THROUGHPUT_SIZES = 7
FIND_THROUGHPUT_STEPS = 12

# ----- the accumulation check, a normalisation grid, the gradient noise -----
ACCUM_MEASURE_STEPS = 20  # the accumulation check times this many steps of each way
MAX_LESSON_BATCHES = 8  # the batch sizes of a normalisation grid or a noise measurement
MAX_NOISE_DRAWS = 256
NOISE_CHUNK = 4096  # the full gradient is taken over the training set in chunks of this many
NOISE_TWO_BATCH = (16, 512)  # the two-batch estimator's batch sizes

# ----- the sharpness study (bsdemo.engine.sharpness) -----
HESSIAN_ITERS = 20  # power iterations for a solution's top Hessian eigenvalue
TRACE_POINTS = 8  # sharpness trace: 8 to 16 points per run
TRACE_ITERS = 2  # power iterations per trace point, warm-started from the last vector
TRACE_SAMPLES = 512  # the trace's Hessian: this many training samples, drawn once
HESSIAN_SAMPLES = 4096  # the Hessian is taken over the training set, or this many of its samples
CHECKS_PER_EPOCH = 8  # a mini-batch run checks the whole training loss this often
NEIGHBOURHOOD_RADIUS = 0.1  # random points this share of each weight row's norm away
NEIGHBOURHOOD_DIRECTIONS = 8
SLICE_POINTS = 41
LONGER_FACTOR = 4  # "train longer": this many times the steps the target took
WARMUP_SHARE = 0.1  # "warm-up": a linear ramp over this share of the step cap
SHARPNESS_MAX_STEPS = 3000  # each run's default step cap
REMEDY_LR_CAP = 0.8  # the scaled lr of the remedies, at most (√90 × 0.3 = 2.8 diverges)

# ----- the critical batch (bsdemo.engine.critical) -----
CRITICAL_DRAWS = 32  # batch-1 gradients behind the critical-batch study's B_simple
CRITICAL_MAX_EPOCHS = 250  # a run also stops after this many epochs (the full batch: steps)

# ----- fitting a bigger batch (bsdemo.engine.fitbatch), the process groups -----
FIT_PROBES = (8, 64)  # the two batches each technique's memory line is fitted through
FIT_TIMED_STEPS = 3  # steps timed at a technique's largest batch (their median)
FIT_BUDGET_STEPS = 100  # steps of the loss comparison
FIT_BUDGET_BATCH = 64
DDP_MAX_PROCESSES = 4  # a data-parallel job's group: more than a class's server should spare
DDP_MAX_STEPS = 200
PIPELINE_STAGES = 2
PIPELINE_MAX_MICRO_BATCHES = 16
