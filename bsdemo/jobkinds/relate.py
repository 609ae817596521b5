"""What relates a job kind's checked options to its workload (`relate_*`, a Kind's `relate`): a
micro-batch that must fit the training set, a study that needs plain SGD, a search capped by the
server's largest batch. The server and the CLI call the same function (the CLI with no limits).
Pure Python."""

from __future__ import annotations

from bsdemo.config import CheckedRunConfig, ConfigError
from bsdemo.jobkinds.kind import accumulation_config, check_global_batch, check_pipeline
from bsdemo.limits import Limits


def relate_find(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    if limits is not None:  # the finder searches up to the server's largest batch, never past
        given = options["max_batch"]
        options["max_batch"] = min(given or limits.max_batch_size, limits.max_batch_size)
    return options


def relate_accum(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    micro, k = options["micro_batch"], options["accum"]
    if cfg.batch_norm_1d and micro < 2:
        raise ConfigError(
            "micro_batch", micro, "at least 2 with BatchNorm: it normalises over the micro-batch"
        )
    big = accumulation_config(cfg, options["variable_length"])
    if micro * k > big.train_samples:
        raise ConfigError(
            "micro_batch",
            micro,
            f"micro-batch × accumulation steps at most the {big.train_samples:,} "
            f"training samples (got {micro} × {k})",
        )
    return options


def relate_norms(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    if cfg.epochs is None:
        raise ConfigError("epochs", None, "an epoch budget: every cell trains the same epochs")
    return options


def relate_plain_sgd(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    """A study of plain gradient steps: SGD, and a step is one batch's gradient."""
    if cfg.optimizer != "sgd":
        raise ConfigError(
            "optimizer",
            cfg.optimizer,
            "sgd: the study's steps are plain gradient steps (its 2/lr, its Hessian)",
        )
    if cfg.accumulation_steps != 1:
        raise ConfigError(
            "accumulation_steps", cfg.accumulation_steps, "1: the study's batches are whole batches"
        )
    return options


def relate_fit(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    if limits is not None:  # the search stops at the server's largest batch
        options["max_batch"] = limits.max_batch_size
    return options


def relate_ddp(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    check_global_batch(cfg, options["processes"])
    return options


def relate_pipeline(cfg: CheckedRunConfig, options: dict, limits: Limits | None) -> dict:
    check_pipeline(cfg, options["micro_batches"])
    return options
