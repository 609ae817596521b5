"""What a model on a 2-D dataset has learned: the class it predicts at every point of a grid
over the data (its decision regions), with a fixed sample of test points to draw on them."""

from __future__ import annotations

import torch

GRID = 40  # cells a side: 1,600 predictions, one cheap forward pass
POINTS = 150  # test points drawn over the regions (the test split is already shuffled)
PAD = 0.1  # the grid reaches this share of the data's span past its extremes
CLASS_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"  # one character a cell


def is_planar(x: torch.Tensor) -> bool:
    """Whether samples are points in the plane (the toy datasets): (N, 2) floats."""
    return x.dim() == 2 and x.shape[1] == 2 and x.is_floating_point()


@torch.no_grad()
def decision_regions(
    model: torch.nn.Module,
    x_train: torch.Tensor,
    x_test: torch.Tensor,
    y_test: torch.Tensor,
    grid: int = GRID,
    points: int = POINTS,
) -> dict:
    """{"box": [x0, x1, y0, y1] in the model's (standardised) input space, "size": grid,
    "classes": the predicted class of each cell, row by row from the bottom (y0) up, one
    character each (CLASS_CHARS), "points": [[x, y, class], ...] of the first `points` test
    samples}. The model is put back in train mode."""
    lo, hi = x_train.min(dim=0).values, x_train.max(dim=0).values
    span = (hi - lo).clamp_min(1e-6)
    lo, hi = lo - PAD * span, hi + PAD * span
    xs = torch.linspace(float(lo[0]), float(hi[0]), grid, device=x_train.device)
    ys = torch.linspace(float(lo[1]), float(hi[1]), grid, device=x_train.device)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")  # row i: y = ys[i], along x
    cells = torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1)
    model.eval()
    try:
        predicted = model(cells).argmax(dim=1).tolist()
    finally:
        model.train()
    sample = [
        [round(float(a), 3), round(float(b), 3), int(c)]
        for (a, b), c in zip(x_test[:points].tolist(), y_test[:points].tolist(), strict=True)
    ]
    return {
        "box": [
            round(float(lo[0]), 4),
            round(float(hi[0]), 4),
            round(float(lo[1]), 4),
            round(float(hi[1]), 4),
        ],
        "size": grid,
        "classes": "".join(CLASS_CHARS[c % len(CLASS_CHARS)] for c in predicted),
        "points": sample,
    }
