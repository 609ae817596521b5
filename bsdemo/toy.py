"""A two-parameter problem small enough to see: SGD paths on its whole loss surface (lesson 8).

Least squares y ≈ w·x + b on N points whose x sit around 3 (so w and b trade off: the valley is
long and thin). The loss over (w, b) is computed exactly on a grid, and each batch size's path
is real mini-batch SGD from one start with one learning rate and the same number of steps,
batches drawn without replacement, epoch by epoch. Pure numpy: milliseconds, so the page runs
it itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N = 256
START = (-1.0, 4.0)  # (w, b): the same start for every path


@dataclass(frozen=True)
class Toy:
    x: np.ndarray
    y: np.ndarray

    def loss(self, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Mean squared error / 2 at every (w, b) given (broadcast)."""
        r = w[..., None] * self.x + b[..., None] - self.y
        return 0.5 * (r**2).mean(-1)

    @property
    def optimum(self) -> tuple[float, float]:
        a = np.stack([self.x, np.ones_like(self.x)], 1)
        w, b = np.linalg.lstsq(a, self.y, rcond=None)[0]
        return float(w), float(b)


def toy(seed: int = 0) -> Toy:
    rng = np.random.default_rng(seed)
    x = rng.normal(3.0, 1.0, N)
    return Toy(x, 2.0 * x + 1.0 + rng.normal(0.0, 1.0, N))


def sgd_path(problem: Toy, batch: int, lr: float, steps: int, seed: int = 0) -> np.ndarray:
    """(steps + 1, 2) points (w, b) of mini-batch SGD at `batch` from START."""
    rng = np.random.default_rng(seed + 1000 * batch)
    w, b = START
    path, order, at = [(w, b)], rng.permutation(N), 0
    for _ in range(steps):
        if at + batch > N:  # a new epoch: a fresh shuffle, whole batches only
            order, at = rng.permutation(N), 0
        idx = order[at : at + batch]
        at += batch
        r = w * problem.x[idx] + b - problem.y[idx]
        w, b = w - lr * float((r * problem.x[idx]).mean()), b - lr * float(r.mean())
        path.append((w, b))
    return np.array(path)


def paths(batches: tuple[int, ...] = (1, 8, 64, N), lr: float = 0.05, steps: int = 60, seed: int = 0) -> dict:
    """The surface on a grid around the paths, and each batch's path and final loss."""
    problem = toy(seed)
    runs = {b: sgd_path(problem, min(b, N), lr, steps, seed) for b in batches}
    points = np.concatenate([*runs.values(), [START, problem.optimum]])
    (w0, b0), (w1, b1) = points.min(0), points.max(0)
    pad_w, pad_b = 0.15 * (w1 - w0 + 1e-9), 0.15 * (b1 - b0 + 1e-9)
    ws = np.linspace(w0 - pad_w, w1 + pad_w, 120)
    bs = np.linspace(b0 - pad_b, b1 + pad_b, 120)
    grid = problem.loss(*np.meshgrid(ws, bs))
    finals = {b: float(problem.loss(np.array(p[-1, 0]), np.array(p[-1, 1]))) for b, p in runs.items()}
    return {
        "w": ws,
        "b": bs,
        "loss": grid,
        "paths": runs,
        "final_loss": finals,
        "optimum": problem.optimum,
        "best_loss": float(problem.loss(np.array(problem.optimum[0]), np.array(problem.optimum[1]))),
        "lr": lr,
        "steps": steps,
        "n": N,
    }
