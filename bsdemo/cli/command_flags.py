"""Each measuring command's flags (bsdemo sweep, find, noise, …): what it takes beyond the
workload flags it shares with `bsdemo train`, each with its help and default. Read by
bsdemo.cli.parser.build_parser; docs/cli.md is generated from them (scripts/docs.py)."""

from __future__ import annotations

import argparse

from bsdemo.jobkinds import KINDS
from bsdemo.jobkinds.schema import add_flag
from bsdemo.presets import PRESETS

WORKLOAD_FLAGS = (
    "dataset",
    "model",
    "norm",
    "width",
    "depth",
    "lr",
    "optimizer",
    "seed",
    "device",
    "samples",
)


def _model_file_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model-file",
        metavar="PATH.py:FACTORY",
        help="measure your own model instead of the lab's: FACTORY() in PATH.py "
        "returns a bsdemo.api.Workload (model, batch or data, loss, "
        "optimizer); your code runs in this terminal only, never on a lab "
        "server. With it, only --device and --seed of the workload flags "
        "apply",
    )
    parser.add_argument(
        "--probe-timeout",
        metavar="SECONDS",
        help="with --model-file: the most seconds one step of your model may "
        "take before the command stops it as hung (default 600)",
    )


def _kind_flags(parser: argparse.ArgumentParser, kind: str) -> None:
    """The flags of a job kind's options, from its declaration (bsdemo.jobkinds.options)."""
    for option in KINDS[kind].options:
        if option.cli is not None:
            add_flag(parser, option)


def _workload_flags(
    parser: argparse.ArgumentParser,
    train: argparse.ArgumentParser,
    size: bool = True,
    leave_out: tuple[str, ...] = (),
) -> None:
    """The workload flags of `train`, with its help, for a measuring command (less those the
    command sets itself)."""
    for flag in [f for f in WORKLOAD_FLAGS if f not in leave_out] + (["size"] if size else []):
        parser.add_argument(f"--{flag}", help=train._option_string_actions[f"--{flag}"].help)


def _add_sweep(sub, train: argparse.ArgumentParser) -> None:
    sweep = sub.add_parser(
        "sweep",
        help="time full training steps over a list of batch sizes",
        description="Per batch size: warm-up, then timed full training steps; "
        "a table, or --json lines (sweep_point ..., sweep_end; a point "
        'measured again repeats with "replaces": true).',
    )
    _kind_flags(sweep, "sweep")
    _model_file_flag(sweep)
    _workload_flags(sweep, train)
    sweep.add_argument("--json", action="store_true", help="one JSON object per line")


def _add_profile(sub, train: argparse.ArgumentParser) -> None:
    prof = sub.add_parser(
        "profile",
        help="where a step's time goes at a small and a large batch "
        "(torch.profiler), and what cutting the overhead buys",
        description="Per batch size: a few of the lab's training steps under "
        "torch.profiler, unprofiled steps before and after (the "
        "throughput), each step split into time that stays fixed "
        "as the batch grows and time that grows with it; then the "
        "same step eager against torch.compile (CPU) or CUDA "
        "graphs (GPU), alternated.",
    )
    _kind_flags(prof, "profile")
    prof.add_argument(
        "--trace-dir", help="write each batch's Chrome/Perfetto trace here (trace_batch<B>.json)"
    )
    _workload_flags(prof, train)
    prof.add_argument(
        "--json", action="store_true", help="one JSON object per line (profile_point, cut_point, profile_end)"
    )


def _add_find(sub, train: argparse.ArgumentParser) -> None:
    find = sub.add_parser(
        "find",
        help="find the largest batch that fits, measured",
        description="Probe, fit memory, predict the largest batch under the "
        "budget minus a margin, verify it with a real step.",
    )
    _kind_flags(find, "find")
    _model_file_flag(find)
    _workload_flags(find, train)
    find.add_argument("--json", action="store_true", help="one JSON object per line")


def _add_accum_check(sub, train: argparse.ArgumentParser) -> None:
    accum = sub.add_parser(
        "accum-check",
        help="one batch of k·b vs k accumulated micro-batches",
        description="Same seed, same samples: compare gradients and "
        "parameters of one big batch against accumulation.",
    )
    _kind_flags(accum, "accum_check")
    _workload_flags(accum, train, size=False)
    accum.add_argument("--json", action="store_true", help="the result as one JSON object")


def _add_regimes(sub, train: argparse.ArgumentParser) -> None:
    regimes = sub.add_parser(
        "regimes",
        help="SGD (batch 1) vs full batch vs mini-batch",
        description="Train the three regimes on the same model, data, seed and epoch budget.",
    )
    regimes.add_argument("--epochs", default="5", help="epoch budget of each regime (default 5)")
    regimes.add_argument("--mini-batch", default="32", help="the mini-batch size (default 32)")
    regimes.add_argument("--time-limit", help="seconds each regime may train (default none)")
    _workload_flags(regimes, train, size=False)
    regimes.add_argument("--json", action="store_true", help="events and results as JSON lines")


def _add_norms(sub, train: argparse.ArgumentParser) -> None:
    norms = sub.add_parser(
        "norms",
        help="none / BatchNorm / GroupNorm / LayerNorm at tiny batches",
        description="Train the model with each normalisation at each batch "
        "size for the same epochs: test accuracy, BatchNorm's "
        "train-vs-eval gap, and how many predictions change "
        "with the batch-mates alone.",
    )
    _kind_flags(norms, "norms")
    norms.add_argument("--epochs", default="2", help="epoch budget of every run (default 2)")
    _workload_flags(norms, train, size=False, leave_out=("norm",))
    norms.add_argument("--json", action="store_true", help="one norms_result line per run")


def _add_noise(sub, train: argparse.ArgumentParser) -> None:
    noise = sub.add_parser(
        "noise",
        help="gradient noise against the batch size, and B_simple",
        description="At the model's initialisation (or after --after-steps "
        "optimizer steps): the variance of mini-batch gradients "
        "against the batch, its log-log slope, and the simple "
        "noise scale B_simple, directly and by the two-batch "
        "estimator.",
    )
    _kind_flags(noise, "noise")
    _model_file_flag(noise)
    _workload_flags(noise, train, size=True)
    noise.add_argument("--json", action="store_true", help="noise_point lines, then the noise_result")


CRITICAL_LR = "0.2"  # the reference batch's default lr (pages/noise.py's too)
SHARPNESS_LR = "0.3"  # the study's default lr (pages/sharpness.py's too)


def _add_critical(sub, train: argparse.ArgumentParser) -> None:
    crit = sub.add_parser(
        "critical-batch",
        help="steps to a target loss against the batch size, and the critical batch",
        description="For each batch size, train with plain SGD (lr by --rule "
        "from the reference batch's --lr, at most --lr-cap) until "
        "the training loss reaches --target-loss; the critical "
        "batch, where the steps are twice the fewest, beside "
        "B_simple at initialisation.",
    )
    _kind_flags(crit, "critical")
    _workload_flags(crit, train, size=True, leave_out=("optimizer",))
    crit.set_defaults(lr=CRITICAL_LR)
    crit.add_argument(
        "--json", action="store_true", help="one critical_point line per batch, then the critical_result"
    )


def _add_sharpness(sub, train: argparse.ArgumentParser) -> None:
    study = sub.add_parser(
        "sharpness",
        help="small vs large batch to the same training loss: the generalisation gap and sharpness",
        description="Train a small and a large batch with plain SGD from one "
        "initialisation until the training loss reaches "
        "--target-loss; then train and test loss and accuracy, "
        "the top Hessian eigenvalue, the loss rise in a random "
        "neighbourhood, and the loss along the line between the "
        "two solutions.",
    )
    _kind_flags(study, "sharpness")
    _workload_flags(study, train, size=True, leave_out=("optimizer",))
    study.set_defaults(lr=SHARPNESS_LR)
    study.add_argument(
        "--json",
        action="store_true",
        help="sharpness_progress lines while a run trains (its loss curve so "
        "far, every second), one sharpness_run line per run, then the "
        "sharpness_result",
    )


def _add_fit_batch(sub, train: argparse.ArgumentParser) -> None:
    fit = sub.add_parser(
        "fit-batch",
        help="the largest batch each technique fits under a memory budget, and its samples/s",
        description="Per technique (fp32, bf16 autocast, fp16 with a gradient "
        "scaler on CUDA, gradient checkpointing, both, "
        "accumulation): memory at two batches, the largest batch "
        "under --memory-budget, verified by a real step, its "
        "samples/s, and the training loss after a fixed budget "
        "against fp32's.",
    )
    _kind_flags(fit, "fit_batch")
    _model_file_flag(fit)
    _workload_flags(fit, train, size=True)
    fit.add_argument(
        "--json", action="store_true", help="one fit_batch_result line per technique, then the fit_batch_end"
    )


def _add_ddp(sub, train: argparse.ArgumentParser) -> None:
    ddp = sub.add_parser(
        "ddp-check",
        help="data parallelism for real: a torch.distributed group against one process",
        description="Start --processes processes in a gloo process group, "
        "each computing the gradient of its share of one global "
        "batch, averaged by all-reduce; then the same steps in "
        "one process with the whole batch: the parameter "
        "difference, compute against all-reduce time, and the "
        "scaling efficiency.",
    )
    _kind_flags(ddp, "ddp")
    ddp.add_argument("--batch-size", default="32", help="each process's batch (default 32)")
    _workload_flags(ddp, train, size=True, leave_out=("device", "optimizer"))
    ddp.add_argument("--json", action="store_true", help="the ddp_check record as JSON")


def _add_architectures(sub, train: argparse.ArgumentParser) -> None:
    arch = sub.add_parser(
        "architectures",
        help="each architecture's batch range on this machine, against the rule of thumb",
        description="Train each architecture (cnn, transformer, lstm, gan; "
        "each from its own preset) at each batch size for the same "
        "seconds, the lr scaled by the square root of B/32: "
        "samples/s, peak memory and quality per run, then each "
        "architecture's measured range beside the rule of thumb.",
    )
    _kind_flags(arch, "architectures")
    arch.add_argument("--seed", default="0", help="model init and shuffling (default 0)")
    arch.add_argument("--device", help=train._option_string_actions["--device"].help)
    arch.add_argument(
        "--json",
        action="store_true",
        help="one architecture_point line per run, "
        "an architecture_summary per "
        "architecture, then architectures_end",
    )


def _add_pipeline(sub, train: argparse.ArgumentParser) -> None:
    pipe = sub.add_parser(
        "pipeline-check",
        help="model parallelism shown: the MLP in two stages on two processes (GPipe)",
        description="Cut the MLP's layers into two stages, one per process "
        "of a gloo group, and train with a GPipe schedule: "
        "micro-batches forward through stage 0, their "
        "activations sent to stage 1, gradients sent back. "
        "Reports each stage's memory, forward/backward times, "
        "the activation transfer, the idle bubble, and the "
        "parameter difference against one process.",
    )
    _kind_flags(pipe, "pipeline")
    pipe.add_argument("--batch-size", default="64", help="the batch of a step (default 64)")
    _workload_flags(pipe, train, size=True, leave_out=("device", "optimizer", "model"))
    pipe.add_argument("--json", action="store_true", help="the pipeline_check record as JSON")


def _add_datasets(sub, train: argparse.ArgumentParser) -> None:
    data = sub.add_parser(
        "datasets",
        help="list or fetch the downloadable datasets",
        description="MNIST, Fashion-MNIST and CIFAR-10 from their published "
        "files, checked against their published MD5s.",
    )
    data.add_argument(
        "action", nargs="?", choices=["list", "fetch"], default="list", help="list (the default) or fetch"
    )
    data.add_argument("names", nargs="*", help="default: all of them")
    data.add_argument("--cache", help="the cache folder (default $BSDEMO_DATA_DIR/datasets)")


def _add_warm(sub, train: argparse.ArgumentParser) -> None:
    warm = sub.add_parser(
        "warm",
        help="pre-compute a lecture's runs into the run store",
        description="Train a preset's runs, a lesson's scenarios, or a "
        "lecture plan's links (Training Lab, regimes, lr_scaling) "
        "now and store them, so the pages serve them at once "
        "(labelled as stored results).",
    )
    which = warm.add_mutually_exclusive_group(required=True)
    which.add_argument("--preset", help=f"one of {', '.join(PRESETS)}")
    which.add_argument("--plan", help="a lecture plan (TOML: [[run]] title, link; see examples/lecture.toml)")
    which.add_argument("--lesson", help="every scenario of a lesson: training_lab, regimes or lr_scaling")
    warm.add_argument("--batch-sizes", default="32", help="comma-separated (default 32)")
    warm.add_argument(
        "--data-dir",
        help="the SQLite run store's folder (default: the PostgreSQL "
        "store at $BSDEMO_DATABASE_URL when set, else $BSDEMO_DATA_DIR)",
    )


# in the order `bsdemo --help` lists them
ADDERS = (
    _add_sweep,
    _add_profile,
    _add_find,
    _add_accum_check,
    _add_regimes,
    _add_norms,
    _add_noise,
    _add_critical,
    _add_sharpness,
    _add_fit_batch,
    _add_ddp,
    _add_pipeline,
    _add_architectures,
    _add_datasets,
    _add_warm,
)
