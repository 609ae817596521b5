"""Predicted memory of a run, in closed form, before any worker has seen it (pure Python).

The scheduler admits a run onto a shared device only when its predicted peak, with the peaks of
the runs already there, fits (bsdemo.scheduler). The prediction is the engine's own accounting done on
paper: parameters, gradients, optimizer state, the activations autograd saves for backward (what
bsdemo.engine.memory.SavedActivations counts), the workspace estimate (the largest saved
tensor), plus what the engine keeps on the device besides: the dataset itself and the transient
of an evaluation pass. tests/unit/test_footprint.py holds it to the engine's measured counts
for every model, norm and dataset, so the two cannot drift apart unnoticed.

Everything here is float32 (4 bytes) except token ids, labels and max-pool indices (int64).
"""

from __future__ import annotations

from dataclasses import dataclass

from bsdemo.config import GAN_LATENT, IMAGE_DATASETS, TRANSFORMER_HEADS, RunConfig

F32, I64 = 4, 8
EVAL_CHUNK = 1024  # samples per no-grad forward when evaluating (the engine evaluates in these)
SEQUENCE_LENGTH, VOCAB_SIZE = 11, 12  # the arithmetic task: '123+456=057' -> next characters
IMAGE_SHAPES = {
    "digits": (1, 8, 8),
    "synthetic": (1, 28, 28),
    "mnist": (1, 28, 28),
    "fashion": (1, 28, 28),
    "cifar10": (3, 32, 32),
}


@dataclass(frozen=True)
class Footprint:
    """Bytes one run needs, by part. `peak` is what the engine's accounted memory will read;
    `device` adds the dataset and the evaluation transient (what a GPU must also hold)."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int  # saved for backward by the largest micro-batch
    workspace: int  # the largest single saved tensor: backward allocates buffers that size
    data: int  # train and test split, resident on the device
    evaluation: int  # no-grad forward of one evaluation chunk (between steps, not during one)
    micro_batch: int

    @property
    def fixed(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state

    @property
    def peak(self) -> int:
        return self.fixed + self.activations + self.workspace

    @property
    def device(self) -> int:
        return self.fixed + self.data + max(self.activations + self.workspace, self.evaluation)


def n_classes(cfg: RunConfig) -> int:
    """Output classes (the vocabulary size of the sequence task)."""
    if cfg.dataset == "arithmetic":
        return VOCAB_SIZE
    return 4 if cfg.dataset == "blobs" else 2 if cfg.dataset not in IMAGE_DATASETS else 10


def input_shape(cfg: RunConfig) -> tuple[int, ...]:
    if cfg.dataset == "arithmetic":
        return (SEQUENCE_LENGTH,)
    return IMAGE_SHAPES.get(cfg.dataset, (2,))


def predict(cfg: RunConfig) -> Footprint:
    """The footprint of a validated cfg's largest micro-batch."""
    micro = min(cfg.batch_size, cfg.train_samples)
    params, per_sample, per_batch = _walk(cfg)
    activations = micro * sum(per_sample) + per_batch
    workspace = micro * max(per_sample)
    largest_two = sorted(per_sample)[-2:]
    chunk = min(EVAL_CHUNK, max(cfg.train_samples, cfg.test_samples))
    param_bytes = F32 * params
    state = expected_optimizer_state_bytes(cfg.optimizer, param_bytes)
    return Footprint(
        parameters=param_bytes,
        gradients=param_bytes,
        optimizer_state=state,
        activations=activations,
        workspace=workspace,
        data=_data_bytes(cfg),
        evaluation=chunk * sum(largest_two),
        micro_batch=micro,
    )


def step_flops_bound(cfg: RunConfig, effective_batch: int | None = None) -> float:
    """A lower bound on the FLOPs of one optimizer step of a validated cfg: each weight outside
    an embedding table is multiplied at least once per sample going forward (2 FLOPs: a multiply
    and an add) and once more for its own gradient (2 FLOPs). Convolutions, sequences and the
    input gradients only add to it; embedding tables are looked up, not multiplied.
    effective_batch: the step's samples (default: cfg's effective batch, at most its training set)."""
    params = _walk(cfg)[0]
    if cfg.model == "transformer":  # its position table, and the token table on the characters
        shape = input_shape(cfg)
        params -= (shape[0] + n_classes(cfg) if len(shape) == 1 else shape[1]) * cfg.width
    elif cfg.model == "lstm" and cfg.dataset == "arithmetic":
        params -= n_classes(cfg) * cfg.width  # its token table
    return 4.0 * params * (effective_batch or min(cfg.effective_batch_size, cfg.train_samples))


def expected_optimizer_state_bytes(optimizer: str, param_bytes: int) -> int:
    """State the optimizer will allocate at its first step: momentum 1x, Adam/AdamW 2x the
    parameters (their per-parameter step counters are a few bytes and left out)."""
    return {"sgd": 0, "momentum": param_bytes}.get(optimizer, 2 * param_bytes)


def norm_groups(channels: int) -> int:
    """Largest group count <= 8 that divides channels (GroupNorm needs a divisor)."""
    return max(g for g in range(1, 9) if channels % g == 0)


def _data_bytes(cfg: RunConfig) -> int:
    n = cfg.total_samples
    if cfg.dataset == "arithmetic":
        return n * SEQUENCE_LENGTH * 2 * I64  # inputs and targets, token ids
    features = 1
    for d in input_shape(cfg):
        features *= d
    return n * (features * F32 + I64)


def _walk(cfg: RunConfig) -> tuple[int, list[int], int]:
    """(parameter count, bytes per sample of each tensor autograd saves, bytes saved once per
    batch) for cfg's model.

    Mirrors bsdemo.engine.models: a Linear or conv saves its input, ReLU its output, a norm layer
    its input (and per-sample statistics), max-pool its input and its int64 indices, GELU its
    input, cross-entropy its log-probabilities and targets. A tensor saved by two ops (ReLU's
    output is the next layer's input) is listed once, as SavedActivations counts storages once.
    """
    classes = n_classes(cfg)
    shape = input_shape(cfg)
    if cfg.model == "transformer":
        return _transformer(cfg.width, cfg.depth, shape, classes)
    if cfg.model == "lstm":
        return _lstm(cfg.width, cfg.depth, shape, classes)
    if cfg.model == "gan":
        return _gan(cfg.width, cfg.depth, shape)
    if cfg.model == "mlp":
        return _mlp(cfg, shape, classes)
    return _cnn(cfg, shape, classes)


def _norm(kind: str, features: int, per_sample: int, groups: int) -> tuple[int, list[int], int]:
    """(parameters, saved per sample, saved per batch) of a norm layer over `features` channels
    whose input has `per_sample` elements. BatchNorm saves its running mean and variance and the
    batch's mean and inverse std (per batch); LayerNorm and GroupNorm a mean and rstd per sample."""
    if kind == "none":
        return 0, [], 0
    if kind == "batch":
        return 2 * features, [F32 * per_sample], 4 * F32 * features
    stats = F32 * (1 if kind == "layer" else groups)
    return 2 * features, [F32 * per_sample, stats, stats], 0


def _loss(classes: int, positions: int = 1) -> list[int]:
    return [F32 * classes * positions, I64 * positions]  # log-softmax output, targets


LOSS_PER_BATCH = F32  # nll_loss's total weight


def _mlp(cfg: RunConfig, shape: tuple[int, ...], classes: int) -> tuple[int, list[int]]:
    features = 1
    for d in shape:
        features *= d
    params, saved, width = 0, [F32 * features], cfg.width  # the first Linear saves the input
    per_batch = LOSS_PER_BATCH
    for i in range(cfg.depth):
        params += (features if i == 0 else width) * width + width
        norm_params, norm_saved, norm_batch = _norm(
            cfg.norm, width, width, 1 if cfg.norm == "layer" else norm_groups(width)
        )
        params += norm_params
        per_batch += norm_batch
        saved += norm_saved + [F32 * width]  # ReLU's output (the next Linear's input)
    params += width * classes + classes
    return params, saved + _loss(classes), per_batch


def _cnn(cfg: RunConfig, shape: tuple[int, ...], classes: int) -> tuple[int, list[int]]:
    channels, side = shape[0], shape[-1]
    params, saved = 0, [F32 * channels * side * side]  # the first conv saves the input
    per_batch = LOSS_PER_BATCH
    for i in range(cfg.depth):
        out = cfg.width * 2**i
        params += channels * out * 9 + (out if cfg.norm == "none" else 0)
        norm_params, norm_saved, norm_batch = _norm(
            cfg.norm, out, out * side * side, 1 if cfg.norm == "layer" else norm_groups(out)
        )
        params += norm_params
        per_batch += norm_batch
        saved += norm_saved + [F32 * out * side * side]  # ReLU's output
        if side >= 4:  # max-pool saves its input (ReLU's output) and indices; emits the next input
            side //= 2
            saved += [I64 * out * side * side, F32 * out * side * side]
        channels = out
    params += channels * side * side * classes + classes
    return params, saved + _loss(classes), per_batch


def _transformer(width: int, depth: int, shape: tuple[int, ...], classes: int) -> tuple[int, list[int], int]:
    """bsdemo.engine.models.TinyTransformer: on token ids the embedding table and a prediction
    at every position; on images a projection of each row and one prediction (from the last
    position, read from the final LayerNorm's output, which stays saved whole)."""
    tokens = len(shape) == 1
    t = shape[0] if tokens else shape[1]
    c, heads = width, TRANSFORMER_HEADS
    features = c if tokens else shape[0] * shape[-1]
    inputs = classes * c if tokens else features * c + c  # embedding table, or a Linear
    params = inputs + t * c + depth * (12 * c * c + 13 * c) + 2 * c + c * classes + classes
    # token ids (the embedding's backward), or the rows (the projection's input)
    saved = [I64 * t] if tokens else [F32 * t * features]
    for _ in range(depth):
        saved += [
            F32 * t * c,
            F32 * 2 * t,  # block input (saved by ln1) and ln1's mean/rstd
            F32 * t * c,  # ln1 output (qkv's input)
            F32 * 3 * t * c,  # q, k, v: views of the qkv output
            F32 * t * c,
            F32 * heads * t,  # attention output (proj's input) and log-sum-exp
            F32 * t * c,
            F32 * 2 * t,  # residual sum (ln2's input) and ln2's mean/rstd
            F32 * t * c,  # ln2 output (fc1's input)
            F32 * 4 * t * c,
            F32 * 4 * t * c,  # fc1 output (GELU's input), GELU output (fc2's)
        ]
    saved += [F32 * t * c, F32 * 2 * t, F32 * t * c]  # final LayerNorm's input, stats, output
    return params, saved + _loss(classes, t if tokens else 1), I64 * t + LOSS_PER_BATCH  # + positions


def _lstm(width: int, depth: int, shape: tuple[int, ...], classes: int) -> tuple[int, list[int], int]:
    """bsdemo.engine.models.LSTM: per layer and time step the sigmoid gates (3H), the tanh
    candidate (H), tanh of the cell (H) and the hidden state (H, the next step's input), and the
    cell state of every step but the last (saved by f * c). A layer's last hidden state is saved
    only where the head reads it (the last layer of a classifier); the stacked outputs a layer
    hands on are a tensor of their own."""
    tokens = len(shape) == 1
    steps = shape[0] if tokens else shape[1]
    features = width if tokens else shape[0] * shape[-1]
    h = F32 * width
    params = (classes * width if tokens else 0) + width * classes + classes
    saved = [I64 * steps, F32 * steps * width] if tokens else [F32 * steps * features]
    for i in range(depth):
        params += (features if i == 0 else width) * 4 * width + 4 * width + width * 4 * width
        last = i == depth - 1
        saved += steps * [3 * h, h, h] + (steps - 1) * [h] + (steps - (0 if last and not tokens else 1)) * [h]
        if tokens or not last:
            saved.append(steps * h)  # the stacked outputs: the next layer's (or head's) input
    return params, saved + _loss(classes, steps if tokens else 1), LOSS_PER_BATCH


def _gan(width: int, depth: int, shape: tuple[int, ...]) -> tuple[int, list[int], int]:
    """bsdemo.engine.models.GAN's training loss: the generator's pass (latent input, its ReLU
    outputs, the tanh image), then three passes of the discriminator — real images (rescaled: a
    tensor of their own), generated images detached, and generated images through the
    discriminator's fixed parameters. The first two save each hidden layer's pre-activation
    (LeakyReLU's input) and output (the next layer's input); the fixed pass saves only the
    pre-activations, since a product with a fixed weight needs no input to differentiate the
    weight. Each pass saves its softplus input (one number per sample)."""
    pixels = 1
    for d in shape:
        pixels *= d
    sizes_g = [GAN_LATENT] + [width] * depth + [pixels]
    sizes_d = [pixels] + [width] * depth + [1]
    params = sum(a * b + b for a, b in zip(sizes_g, sizes_g[1:], strict=False))
    params += sum(a * b + b for a, b in zip(sizes_d, sizes_d[1:], strict=False))
    h = F32 * width
    saved = [F32 * GAN_LATENT] + depth * [h] + [F32 * pixels]  # generator
    saved += [F32 * pixels] + 2 * depth * [h, h] + depth * [h] + 3 * [F32]  # discriminator
    return params, saved, 0
