"""Learning-rate scaling: raise the batch by k — and the learning rate with it."""

import dataclasses
import math

import streamlit as st

from bsdemo import charts
from bsdemo.ui import sweeps
from bsdemo.ui.header import lesson_header
from bsdemo.ui.lab import LR_CHOICES, show_chart

lesson_header("lr_scaling")

cfg = sweeps.workload("lr")
a, b, c, d = st.columns(4)
ref_batch = a.number_input("Reference batch", 1, 4096, 16, key="lr_ref_batch")
ref_lr = b.select_slider("Reference lr", LR_CHOICES, 0.05, key="lr_ref_lr",
                         format_func=lambda v: f"{v:g}")
k = c.number_input("Batch multiplier k", 1, 256, 8, key="lr_k")
epochs = d.number_input("Epochs", 1, 100, 10, key="lr_epochs")
big = int(ref_batch * k)
base = dataclasses.replace(cfg, epochs=int(epochs), time_limit_s=30.0)
warmup = max(1, math.ceil(base.validated()[0].train_samples / big))  # one epoch of warm-up
variants = [("reference", int(ref_batch), ref_lr, 0), ("lr unchanged", big, ref_lr, 0),
            ("linear rule (lr × k)", big, ref_lr * k, 0),
            ("square-root rule (lr × √k)", big, ref_lr * math.sqrt(k), 0),
            ("linear + warm-up", big, ref_lr * k, warmup)]
if big > base.validated()[0].train_samples:
    st.info(f"Batch {big} is more than the training set: it will be clamped (full batch).")
sweeps.group_button("lr", "Compare", [dataclasses.replace(base, batch_size=bb, lr=lr,
                                                          warmup_steps=w)
                                      for _, bb, lr, w in variants],
                    [f"{name}: batch {bb}, lr {lr:.3g}" for name, bb, lr, _ in variants])


def draw(snaps) -> None:
    show_chart(charts.labelled_loss_chart(snaps, "epochs"), "lr_loss")
    st.dataframe(charts.comparison_table(snaps), hide_index=True, key="lr_table")


sweeps.group_view("lr", draw)

st.subheader("Where the best learning rate sits, per batch size")
grid_batches = [8, 32, 128, 512]
grid_lrs = [0.01, 0.03, 0.1, 0.3, 1.0]
grid_epochs = st.number_input("Epochs per cell", 1, 50, 3, key="lr_grid_epochs")
cells = [(bb, lr) for bb in grid_batches for lr in grid_lrs]
sweeps.group_button("grid", f"Train the {len(cells)}-run grid",
                    [dataclasses.replace(cfg, batch_size=bb, lr=lr, epochs=int(grid_epochs),
                                         time_limit_s=10.0) for bb, lr in cells],
                    [f"batch {bb}, lr {lr:g}" for bb, lr in cells], key="grid_run")


def draw_grid(snaps) -> None:
    results = [{"batch": s.config["batch_size"], "lr": s.config["lr"],
                "accuracy": (s.end or {}).get("summary", {}).get("test_accuracy")
                if s.status == "completed" else None,
                "diverged": s.status == "diverged"} for _, s in snaps]
    show_chart(charts.lr_grid_chart(results), "lr_grid")
    best = charts.best_lr_per_batch(results)
    if len(best) > 1:
        ordered = [lr for _, lr in sorted(best.items())]
        rising = all(a <= b for a, b in zip(ordered, ordered[1:], strict=False))
        st.markdown("**Best lr per batch:** " + ", ".join(
            f"batch {bb} → {lr:g}" for bb, lr in sorted(best.items())) + (
            ". In your grid the best learning rate rises with the batch: a larger batch "
            "averages away gradient noise, so it tolerates — and needs — larger steps."
            if rising else ". In your grid the best learning rate does not rise steadily with "
            "the batch: with few epochs and one seed the cells are noisy — try more epochs."))


sweeps.group_view("grid", draw_grid)
