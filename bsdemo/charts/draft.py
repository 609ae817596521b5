"""A figure drawn as plain dicts and checked by plotly once, at the end: what a live page's
charts are drawn on, for speed.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


class Draft:
    """A figure being drawn as plain dicts — its traces and a nested layout — that plotly
    validates once, when `figure()` makes the go.Figure. Every update of a go.Figure validates
    as it goes (0.5-1 ms an update_layout): a live page's charts, rebuilt at each poll of each
    session watching a run, spent most of their time there. It answers the few calls the chart
    helpers of `style` make (add_trace with a dict, update_layout/update_xaxes/update_yaxes with
    nested dicts, never plotly's magic underscore names, add_annotation), so they draw on a
    Draft or a go.Figure alike."""

    def __init__(self):
        self.data: list[dict[str, Any]] = []
        self.layout: dict[str, Any] = {}

    def add_trace(self, trace: dict[str, Any]) -> Draft:
        self.data.append(trace)
        return self

    def update_layout(self, **props) -> Draft:
        _merge(self.layout, props)
        return self

    def update_xaxes(self, **props) -> Draft:
        _merge(self.layout.setdefault("xaxis", {}), props)
        return self

    def update_yaxes(self, **props) -> Draft:
        _merge(self.layout.setdefault("yaxis", {}), props)
        return self

    def add_annotation(self, **note) -> Draft:
        self.layout.setdefault("annotations", []).append(note)
        return self

    def figure(self) -> go.Figure:
        return go.Figure(data=self.data, layout=self.layout)


def _merge(into: dict[str, Any], props: dict[str, Any]) -> None:
    """Deep-merge props into `into`, as plotly's update does (a None value clears nothing)."""
    for key, value in props.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, dict):
            into[key] = {}
            _merge(into[key], value)
        else:
            into[key] = value
