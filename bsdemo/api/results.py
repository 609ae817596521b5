"""What bsdemo.api's measurements return: the engine's records, the page's closing text computed
from them, a pandas frame of one row per batch size, and a notebook's Markdown view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(repr=False)
class _Result:
    """The records the engine yielded, as the lab's pages and `bsdemo --json` get them."""

    records: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""  # the page's closing text, computed from these numbers (Markdown)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, "summary": self.summary, "records": self.records}

    def _rows(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_frame(self):
        """One row per batch size (technique, probe): a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self._rows())

    def _repr_markdown_(self) -> str:  # a notebook shows the closing text under the cell
        return self.summary

    def __repr__(self) -> str:  # a console: what it is and its first sentence, not every record
        first = self.summary.replace("**", "").split("\n")[0]
        return f"<{type(self).__name__}: {len(self.records)} records. {first}>"


@dataclass(repr=False)
class SweepResult(_Result):
    """sweep_point records (the last round of each batch) and the sweep_end (fits, knee)."""

    points: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] = field(default_factory=dict)

    def _rows(self) -> list[dict[str, Any]]:
        return [
            {
                "batch_size": p["batch_size"],
                "status": p["status"],
                "samples_per_sec": p["samples_per_sec"],
                "step_time_s": p["step_time_s"],
                "peak_memory_bytes": p["peak_memory_bytes"],
                "clock": (p.get("timing") or {}).get("clock"),
            }
            for p in self.points
        ]

    def figure(self):
        """Samples/s against the batch (the Throughput page's main chart)."""
        from bsdemo import charts

        return charts.sweep_throughput_chart(self.points).figure

    def step_time_figure(self):
        """Step time against the batch with the fit t(B) = t0 + t1·B."""
        from bsdemo import charts

        return charts.sweep_step_time_chart(
            self.points, self.end.get("fit"), self.end.get("crossover_batch_size")
        ).figure

    def memory_figure(self):
        """Memory against the batch, by part, with the fit M(B) = M0 + m·B."""
        from bsdemo import charts

        return charts.memory_breakdown_chart(
            self.points,
            self.end.get("fit"),
            self.end.get("memory_budget_bytes"),
            self.end.get("predicted_max_batch_size"),
        ).figure


@dataclass(repr=False)
class FindResult(_Result):
    """find_probe records (every real run) and the find_result."""

    probes: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_size(self) -> int | None:
        return self.result.get("batch_size")

    @property
    def accumulation_steps(self) -> int | None:
        return self.result.get("accumulation_steps")

    def _rows(self) -> list[dict[str, Any]]:
        return [
            {
                "probe": p["probe"],
                "batch_size": p["batch_size"],
                "status": p["status"],
                "peak_memory_bytes": p["peak_memory_bytes"],
                "samples_per_sec": p["samples_per_sec"],
                "reason": p["reason"],
            }
            for p in self.probes
        ]

    def figure(self):
        """Each probe's peak memory against its batch, the budget as a line."""
        import plotly.graph_objects as go

        from bsdemo.charts.style import batch_colour

        ran = [p for p in self.probes if p["peak_memory_bytes"]]
        fig = go.Figure(
            go.Scatter(
                x=[p["batch_size"] for p in ran],
                y=[p["peak_memory_bytes"] / 2**20 for p in ran],
                mode="markers+text",
                text=[f"probe {p['probe']}" for p in ran],
                textposition="top center",
                name="probes (measured)",
                marker={"size": 12, "color": [batch_colour(p["batch_size"]) for p in ran]},
            )
        )
        if self.result.get("capacity_bytes"):
            fig.add_hline(
                self.result["capacity_bytes"] / 2**20, line_dash="dash", annotation_text="memory budget"
            )
        fig.update_layout(
            xaxis={"title": "batch size", "type": "log"},
            yaxis={"title": "peak memory (MiB)"},
            title="Finder probes: peak memory per batch size",
        )
        return fig


@dataclass(repr=False)
class FitBatchResult(_Result):
    """One fit_batch_result per technique and the fit_batch_end."""

    techniques: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] = field(default_factory=dict)
    memory_budget_bytes: int = 0

    def _rows(self) -> list[dict[str, Any]]:
        keys = (
            "technique",
            "max_batch_size",
            "effective_batch_size",
            "samples_per_sec",
            "peak_memory_bytes",
            "predicted_max",
            "loss_after",
            "loss_vs_fp32",
        )
        return [{k: r.get(k) for k in keys} for r in self.techniques]

    def figure(self):
        """Each technique's largest batch under the budget (the Fit a bigger batch chart)."""
        from bsdemo import charts

        return charts.fit_chart(self.techniques, self.memory_budget_bytes).figure


@dataclass(repr=False)
class NoiseResult(_Result):
    """noise_point records and the noise_result (B_simple with its 16–84 % range)."""

    points: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def b_simple(self) -> float | None:
        return self.result.get("b_simple")

    @property
    def b_simple_range(self) -> tuple[float, float] | None:
        r = self.result.get("b_simple_range")
        return tuple(r) if r else None

    def _rows(self) -> list[dict[str, Any]]:
        return [{k: p[k] for k in ("batch_size", "variance", "variance_sem", "cosine")} for p in self.points]

    def figure(self):
        """Gradient variance against the batch, with tr(S)/B (the Noise page's chart)."""
        from bsdemo import charts

        return charts.noise_charts(self.result)[0].figure


@dataclass(repr=False)
class ProfileResult(_Result):
    """profile_point records (each batch's step under torch.profiler), cut_point records (the
    step with its fixed cost cut: torch.compile, CUDA graphs) and the profile_end (the split)."""

    points: list[dict[str, Any]] = field(default_factory=list)
    cuts: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] = field(default_factory=dict)

    def _rows(self) -> list[dict[str, Any]]:
        cut = {c["batch_size"]: c for c in self.cuts}
        fit = self.end.get("plain_fit") or {}
        t0, t1 = fit.get("t0_us"), fit.get("t1_us")

        def fixed(b: int) -> float | None:  # the share of a step that stays as the batch grows
            return t0 / (t0 + t1 * b) if t0 is not None and t1 is not None and t0 + t1 * b > 0 else None

        return [
            {
                "batch_size": p["batch_size"],
                "status": p["status"],
                "step_time_s": (p.get("plain_own_s") or {}).get("median"),
                "fixed_share": fixed(p["batch_size"]),
                "cut_speedup": cut.get(p["batch_size"], {}).get("speedup"),
            }
            for p in self.points
        ]

    def figure(self):
        """Each batch's step as shares of its length: forward, backward, optimizer, gaps."""
        from bsdemo import charts

        return charts.profile_timeline_chart(self.points).figure

    def split_figure(self):
        """Each batch's step split into the part that stays fixed and the part that grows."""
        from bsdemo import charts

        return charts.profile_split_chart(self.points, self.end).figure

    def cut_figure(self):
        """Samples/s eager against the step with its fixed cost cut."""
        from bsdemo import charts

        return charts.cut_chart(self.cuts).figure
