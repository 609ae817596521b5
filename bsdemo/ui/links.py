"""A lesson page in its link, and presentation mode.

`PageLink` makes a page's linked widgets: each takes its value from the page's link on the
page's first run in this tab (checked by bsdemo.links, a bad value said as plain text), and at
the end of every run the URL is rewritten to the page as it stands, so a copied link reproduces
the settings (never the control of a run). `finish` also draws the presenter's sidebar:
presentation mode (large type, projector charts), which controls to hide, and the view's link.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode

import streamlit as st

from bsdemo import links
from bsdemo.config import LAB_VIEW_PARAMS
from bsdemo.errors import ConfigError, clip
from bsdemo.links import Control, View
from bsdemo.plaintext import plain
from bsdemo.ui.pagestyle import BASE_CSS, PRESENT_CSS, SKIP_LINK, page_base
from bsdemo.ui.state import lab_view

PRESENT_KEY = "present"  # one switch for every page of this tab


def presenting() -> bool:
    """Presentation mode: the sidebar's switch, or on a page's first run a link's ?present=
    (the header is drawn before PageLink reads the link and sets the switch)."""
    if PRESENT_KEY not in st.session_state and "present" in st.query_params:
        try:
            return Control("present", "", "", "bool").parse(st.query_params["present"])
        except ConfigError:
            return False  # PageLink shows the message
    return bool(st.session_state.get(PRESENT_KEY))


def areas():
    """(where a page's controls go, where its results go), in the script's order: controls
    first, so their widgets exist before any click reruns the page. On screen, presentation mode
    puts the results above the controls: charts first, for the back of the room."""
    if not presenting():
        return st.container(), st.container()
    # the results on top (keyed: PRESENT_CSS's grid), the controls under them
    first, second = st.container(key="present_results"), st.container()
    return second, first


def scenario_row(
    row_key: str, prefix: str, named: Mapping[str, str], use: Callable[[str], None], label: str = "Scenarios:"
) -> None:
    """A row of scenario buttons (name -> query string), keyed `{prefix}_0`, `{prefix}_1`, …,
    each calling use(query) on click; presentation mode can hide the row by `row_key`."""
    if not named:
        return
    # a row that wraps: each button as wide as its name (never cut to "SGD is slow (ba…")
    row = st.container(key=row_key, horizontal=True, vertical_alignment="center")
    row.markdown(f"**{label}**", width="content")
    for i, (name, query) in enumerate(named.items()):
        row.button(
            name,
            key=f"{prefix}_{i}",
            on_click=use,
            args=(query,),
            help="Sets every control: " + (query.replace("&", ", ") or "defaults"),
        )


X_AXIS_PARAM = LAB_VIEW_PARAMS[0]  # the Lab's chart x-axis, in its link once one is chosen


def view_params() -> dict[str, str]:
    """The view's own query parameters (presentation mode, the x-axis chosen for the charts),
    for a page that writes its URL itself (the Training Lab)."""
    chosen = lab_view().get("x_axis")
    return ({"present": "1"} if presenting() else {}) | ({X_AXIS_PARAM: chosen} if chosen else {})


class PageLink:
    """The linked controls of one page, made in page order; `finish()` ends the page."""

    def __init__(self, slug: str, hideable: Sequence[Control] = (), owns_url: bool = True):
        """hideable: controls the page makes itself, offered in the Hide list; owns_url: False
        for a page that writes its own URL (the lab), whose other parameters are its own."""
        self.slug, self.controls, self.owns_url = slug, list(hideable), owns_url
        self._hide_key = f"hide_{slug}"
        first = f"link_read_{slug}"
        # the link is read on the page's first run in this tab; later runs are the widgets' own
        self._params = dict(st.query_params.to_dict()) if first not in st.session_state else {}
        st.session_state[first] = True
        self._errors: list[str] = []
        self._notice = st.empty()  # a bad link's message, at the top of the page
        self._strip = None  # where the scenario buttons go, outside the folded settings
        if self._params:
            self._read_view()

    # ----- widgets -----
    def number(
        self, where, label: str, low: int, high: int, default: int, key: str, param: str | None = None, **kw
    ) -> int:
        return self.control(
            where, Control(param or _param(key), key, label, "int", low, high, default=default), **kw
        )

    def choice(
        self,
        where,
        label: str,
        options: Sequence[Any],
        default: Any,
        key: str,
        param: str | None = None,
        widget: str = "selectbox",
        **kw,
    ) -> Any:
        return self.control(
            where,
            Control(param or _param(key), key, label, "choice", options=tuple(options), default=default),
            widget=widget,
            **kw,
        )

    def toggle(self, where, label: str, default: bool, key: str, param: str | None = None, **kw) -> bool:
        return self.control(where, Control(param or _param(key), key, label, "bool", default=default), **kw)

    def control(self, where, control: Control, widget: str | None = None, **kw) -> Any:
        """The widget of a control declared elsewhere (bsdemo.lessonlinks), filled from the
        link on the page's first run; `widget` picks selectbox or select_slider for a choice."""
        self._take(control)
        if control.kind == "int":
            return where.number_input(control.label, control.low, control.high, key=control.key, **kw)
        if control.kind == "bool":
            return where.toggle(control.label, key=control.key, **kw)
        return getattr(where, widget or "selectbox")(
            control.label, list(control.options), key=control.key, **kw
        )

    def _take(self, control: Control) -> None:
        self.controls.append(control)
        raw = self._params.pop(control.param, None)
        if raw is not None:
            try:
                st.session_state[control.key] = control.parse(raw)
                return
            except ConfigError as exc:
                self._errors.append(str(exc))
        if st.session_state.get(control.key) not in control.options and control.options:
            st.session_state.pop(control.key, None)  # a value no longer offered
        st.session_state.setdefault(control.key, control.default)

    def values(self) -> dict[str, Any]:
        """The values of the linked controls drawn so far, by URL parameter."""
        return {c.param: st.session_state.get(c.key, c.default) for c in self.controls}

    # ----- lecture scenarios -----
    def scenarios(self, named: Mapping[str, str], label: str = "Try next:") -> None:
        """A row of buttons, one a scenario (name -> the page's own query string): each sets
        every linked control of the page, those it does not name to the page's default.
        Drawn after the controls (a click during the page's first run must find them)."""
        with self._strip if self._strip is not None else st.container():
            scenario_row(f"{self.slug}_scenarios", f"{self.slug}_scenario", named, self._use, label)
            if self._scenario_error in st.session_state:
                st.error(plain(st.session_state.pop(self._scenario_error)))

    # ----- the page's areas -----
    def areas(self, settings: str = "Settings"):
        """(where the page's controls go, where its results go), in the script's order.

        Presentation mode: areas(), the results above the controls. Otherwise the controls fold
        into a `settings` expander under the header (folded on a shared link too: the link's
        values are in it, the question and Run stay on the first screen), then the results:
        the prediction, the run button, the takeaway and the main chart, on a 1280x720 screen's
        first view; the scenario buttons in a strip under them ("Try next")."""
        if presenting():
            return areas()
        # keyed by page: the browser then draws each page's expander afresh (unkeyed, one
        # page's open expander could carry over to the next page's, drawn in the same place)
        controls = st.expander(settings, expanded=False, icon=":material/tune:", key=f"settings_{self.slug}")
        results = st.container(key="lesson_results")  # keyed: a phone's order (BASE_CSS)
        self._strip = st.container()
        return controls, results

    @property
    def _scenario_error(self) -> str:
        return f"scenario_error_{self.slug}"

    def _use(self, query: str) -> None:
        """on_click: a scenario's values into the widgets (the page's controls as last drawn);
        a control it leaves out takes its default on the rerun."""
        params = dict(parse_qsl(query, keep_blank_values=True))
        controls = {c.param: c for c in st.session_state.get(f"link_controls_{self.slug}", [])}
        unknown = [p for p in params if p not in controls]
        if unknown:
            st.session_state[self._scenario_error] = str(
                ConfigError("scenario parameter", clip(unknown[0]), ", ".join(controls))
            )
            return
        try:
            values = {controls[p].key: controls[p].parse(raw) for p, raw in params.items()}
        except ConfigError as exc:
            st.session_state[self._scenario_error] = str(exc)
            return
        for control in controls.values():
            st.session_state.pop(control.key, None)
        st.session_state.update(values)

    def _read_view(self) -> None:
        present = self._params.pop("present", None)
        if present is not None:
            try:
                st.session_state[PRESENT_KEY] = Control("present", "", "", "bool").parse(present)
            except ConfigError as exc:
                self._errors.append(str(exc))
        # a page with nothing to hide (Home, the quiz) leaves `hide` to the page the link is for
        self._hide_raw = self._params.pop("hide", None) if self.owns_url or self.controls else None

    # ----- the end of the page -----
    def finish(self) -> None:
        """Say what the link held that could not be used, follow the controls in the URL, and
        draw the presenter's sidebar and presentation mode's styles."""
        by_param = {c.param: c for c in self.controls}
        st.session_state[f"link_controls_{self.slug}"] = list(self.controls)  # for scenarios
        raw = getattr(self, "_hide_raw", None)
        if raw is not None:
            try:
                st.session_state[self._hide_key] = list(links.hidden_params(raw, by_param))
            except ConfigError as exc:
                self._errors.append(str(exc))
            self._hide_raw = None
        for name in list(self._params)[:1] if self.owns_url else []:  # no control takes it
            self._errors.append(
                str(ConfigError("parameter", clip(str(name)), ", ".join([*by_param, *links.VIEW_PARAMS])))
            )
        self._params = {}
        if self._errors:
            self._notice.error(
                plain(
                    f"This link's settings could not all be used — "
                    f"{self._errors[0]}. The page's own value is shown there."
                )
            )
        self._presenter(by_param)
        hidden = [p for p in st.session_state.get(self._hide_key, []) if p in by_param]
        view = View(presenting(), tuple(hidden))
        if self.owns_url:
            wanted = links.write(self.controls, st.session_state, view)
            if st.query_params.to_dict() != wanted:
                st.query_params.from_dict(wanted)
        else:  # the page's own parameters stay; the view's follow the switch
            current = st.query_params.to_dict()
            keep = ("hide",) if not self.controls else ()  # not this page's to hide or show
            wanted = {k: v for k, v in current.items() if k not in links.VIEW_PARAMS or k in keep}
            wanted |= links.write([], {}, view)
            if current != wanted:
                st.query_params.from_dict(wanted)
        css = "".join(
            f".st-key-{key} {{ display: none; }}\n"
            for p in hidden
            for key in (by_param[p].key, *by_param[p].hides)
        )
        if presenting() or css:  # BASE_CSS: every page's (app.py)
            st.html(f"<style>{PRESENT_CSS if presenting() else ''}{css}</style>")

    def _presenter(self, by_param: dict[str, Control]) -> None:
        with st.sidebar:
            st.toggle(
                "Presentation mode",
                key=PRESENT_KEY,
                help="Large type and projector charts for a lecture; the link below opens "
                "this page the same way.",
            )
            if presenting():
                st.multiselect(
                    "Hide these controls",
                    list(by_param),
                    key=self._hide_key,
                    format_func=lambda p: by_param[p].label,
                    help="Hidden controls keep their values; the link keeps them hidden.",
                )
            url = getattr(st.context, "url", None)
            if url:  # in either mode: a student shares settings as an instructor shares a view
                view = View(
                    presenting(), tuple(st.session_state.get(self._hide_key, [])) if presenting() else ()
                )
                own = (
                    {k: v for k, v in st.query_params.to_dict().items() if k not in links.VIEW_PARAMS}
                    if not self.owns_url
                    else links.write(self.controls, st.session_state, View())
                )
                query = urlencode(own | links.write([], {}, view), safe=",")
                st.caption(
                    "This view's link (copy it with the icon):"
                    if presenting()
                    else "A link to this page with these settings (copy it with the icon):"
                )
                st.code(f"{url.split('?')[0]}?{query}", language=None, wrap_lines=True)


def _param(key: str) -> str:
    """A widget key's URL parameter: the key without its page prefix (lr_k -> k)."""
    return key.split("_", 1)[1] if "_" in key else key


__all__ = [
    "BASE_CSS",
    "PRESENT_CSS",
    "PRESENT_KEY",
    "SKIP_LINK",
    "X_AXIS_PARAM",
    "PageLink",
    "areas",
    "page_base",
    "presenting",
    "scenario_row",
    "view_params",
]
