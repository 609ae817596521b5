"""What the screenshots check on a page, in the browser: chart texts that overlap and tables
that do not fit, what its first screen holds (normal, projected, on a phone), and axe-core's
accessibility violations."""

from __future__ import annotations

import os
from pathlib import Path

from scripts.chromium import settled

ROOT = Path(__file__).resolve().parents[1]
# axe-core (npm's package, installed by .ci/run: `npm install --prefix .ci/axe axe-core@4`):
# the accessibility rules every checked page must pass
AXE_JS = Path(
    os.environ.get("BSDEMO_AXE_JS", ROOT / ".ci" / "axe" / "node_modules" / "axe-core" / "axe.min.js")
)
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
AXE_FAILING = ("serious", "critical")  # what fails a page; the rest is reported


VISUAL_PROBLEMS = """() => {
  const problems = [];
  const visible = r => r.width > 0 && r.height > 0;
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2
      && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
  const PARTS = [['title', '.gtitle'], ['subtitle', '.gtitle-subtitle'],
                 ['x title', '.g-xtitle'], ['y title', '.g-ytitle'],
                 ['legend', '.legend .bg'], ['annotation', '.annotation']];
  const OUTSIDE = ['title', 'subtitle', 'x title', 'y title', 'legend'];  // never on the plot
  document.querySelectorAll('.js-plotly-plot').forEach((plot, i) => {
    const parts = [];
    for (const [name, selector] of PARTS) {
      plot.querySelectorAll(selector).forEach(e => {
        const r = e.getBoundingClientRect();
        if (visible(r)) parts.push([name, r, (e.textContent || '').trim().slice(0, 40)]);
      });
    }
    const area = plot.querySelector('.nsewdrag');
    if (area) {
      const r = area.getBoundingClientRect();
      for (const [name, box, text] of parts)
        if (OUTSIDE.includes(name) && overlap(box, r))
          problems.push(`chart ${i}: ${name} "${text}" runs onto the plot`);
    }
    for (let a = 0; a < parts.length; a++)
      for (let b = a + 1; b < parts.length; b++)
        if (overlap(parts[a][1], parts[b][1]))
          problems.push(`chart ${i}: ${parts[a][0]} "${parts[a][2]}" overlaps ${parts[b][0]} `
                        + `"${parts[b][2]}"`);
  });
  document.querySelectorAll('[data-testid="stDataFrame"]').forEach((table, i) => {
    const scroller = table.querySelector('.dvn-scroller');
    if (scroller && scroller.scrollWidth > scroller.clientWidth + 2)
      problems.push(`table ${i}: ${scroller.scrollWidth - scroller.clientWidth}px of its `
                    + 'columns clipped');
  });
  if (document.querySelector('[data-testid="stException"], .stException'))
    problems.push('an exception box');
  return problems;
}"""


LEGEND_GAP_PX = 20  # a legend this far at most from its plot (its axis labels included)
FIRST_SCREEN = """([slug, gap, expect]) => {
  const problems = [];
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  main.scrollTop = 0;
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  const view = window.innerHeight;
  const below = (what, box) => {
    if (box.bottom > view + 1) problems.push(`${what} ends at ${Math.round(box.bottom)} px, `
                                             + `below the first screen (${view} px)`); };
  // the main result: the page's main chart (widgets.show_chart(main=True)), else its first
  // chart or table
  const result = document.querySelector('.st-key-main_chart .js-plotly-plot')
      || document.querySelector('.js-plotly-plot, [data-testid="stDataFrame"]');
  if (!result && expect) problems.push('no result on the page (no chart, no table)');
  if (result) {
    const top = result.getBoundingClientRect().top;
    if (top >= view) problems.push(`the main result starts at ${Math.round(top)} px, below `
                                   + `the first screen (${view} px)`);
    const area = result.querySelector('.nsewdrag');
    if (area) below("the main chart's plot area", area.getBoundingClientRect());
    const r = result.getBoundingClientRect();
    // a box under the result: lower, and across its columns (projected on a landscape screen
    // the question, Run and the takeaway stand in a column beside the main chart)
    const under = b => b.top > top + 1 && b.left < r.right - 1 && b.right > r.left + 1;
    const predict = document.querySelector(`.st-key-predict_${slug}`);
    if (predict && (under(predict.getBoundingClientRect())
                    || predict.getBoundingClientRect().top > top + 1))
      problems.push('the prediction sits below the results');
    if (predict) below('the prediction', predict.getBoundingClientRect());
    // the main takeaway (widgets.takeaway): lifted above the chart it closes (or beside it),
    // whole inside the first screen, under the prediction
    const lead = document.querySelector('.st-key-takeaway [data-testid="stAlert"]');
    if (lead) {
      const t = lead.getBoundingClientRect();
      if (under(t)) problems.push('the takeaway sits under its chart');
      below('the takeaway', t);
      if (predict && predict.getBoundingClientRect().bottom > t.top + 1)
        problems.push('the prediction sits below the takeaway');
    }
  }
  plots.forEach((plot, i) => {
    const legend = plot.querySelector('.legend .bg');
    const area = plot.querySelector('.nsewdrag') || plot.querySelector('.cartesianlayer');
    if (!legend || !area) return;
    const l = legend.getBoundingClientRect(), a = area.getBoundingClientRect();
    if (!(l.width > 0 && l.height > 0)) return;
    let bottom = a.bottom;  // the plot with its x-axis ticks and title
    plot.querySelectorAll('.xtick text, .g-xtitle text').forEach(e => {
      const r = e.getBoundingClientRect();
      if (r.height > 0 && r.bottom > bottom && r.top < l.top) bottom = r.bottom;
    });
    const below = l.top - bottom, right = l.left - a.right;
    const off = l.top >= a.bottom - 1 ? below : l.left >= a.right - 1 ? right : 0;
    const title = (plot.querySelector('.gtitle') || {}).textContent || '';
    if (off > gap) problems.push(`chart ${i} ("${title.slice(0, 40)}"): its legend sits `
                                 + `${Math.round(off)} px from the plot`);
  });
  return problems;
}"""


def first_screen_problems(page, slug: str, expect: bool = True) -> list[str]:
    """What a first screen must hold, normal or projected, checked at the viewport's own size:
    the prediction, then the main takeaway, then the main result (the first chart, or a table
    before it; projected on a landscape screen, the two beside it), the prediction and the
    takeaway whole inside it, and the main chart's whole plot area; every legend within
    LEGEND_GAP_PX of its plot; `expect`: a page that ran an experiment must show a result."""
    return page.evaluate(FIRST_SCREEN, [slug, LEGEND_GAP_PX, expect])


def settled_first_screen(page, slug: str, expect: bool = True, tries: int = 10) -> list[str]:
    """first_screen_problems once the layout has settled: Plotly may still be placing a chart's
    axis labels (or redrawing it at the projector's font size) when the page's script run ends,
    so a problem counts only if it is still there after up to `tries` looks 0.75 s apart; a
    real one stays, a frame caught mid-draw does not."""
    for _ in range(tries - 1):
        problems = first_screen_problems(page, slug, expect)
        if not problems:
            return problems
        page.wait_for_timeout(750)
    return first_screen_problems(page, slug, expect)


PHONE = (390, 844)
PHONE_ORDER = """(slug) => {
  const problems = [];
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  main.scrollTop = 0;
  const top = s => { const e = document.querySelector(s);
                     return e ? e.getBoundingClientRect().top : null; };
  const order = [['the question', top(`.st-key-predict_${slug}`)],
                 ['Run', top(`.st-key-predict_${slug} ~ * button, .st-key-run`)],
                 ['the main chart', top('.st-key-main_chart .js-plotly-plot')],
                 ['the settings', top('[class*="st-key-settings_"], .st-key-w_optimizer')]]
    .filter(([, y]) => y !== null);
  for (let i = 1; i < order.length; i++)
    if (order[i][1] < order[i - 1][1])
      problems.push(`${order[i][0]} comes before ${order[i - 1][0]}`);
  // and the first screen holds the question, Run, the takeaway and the main chart's plot area
  const view = window.innerHeight;
  [['the question', `.st-key-predict_${slug}`], ['Run', `.st-key-predict_${slug} ~ * button, .st-key-run`],
   ['the takeaway', '.st-key-takeaway [data-testid="stAlert"]'],
   ["the main chart's plot area", '.st-key-main_chart .js-plotly-plot .nsewdrag']]
    .forEach(([what, s]) => { const e = document.querySelector(s); if (!e) return;
      const bottom = e.getBoundingClientRect().bottom;
      if (bottom > view + 1) problems.push(`${what} ends at ${Math.round(bottom)} px, below the `
                                           + `first screen (${view} px)`); });
  // nothing wider than the screen (a table scrolls inside its own frame, a chart's hidden parts
  // are clipped by it)
  const width = window.innerWidth, seen = new Set();
  main.querySelectorAll('*').forEach(e => {
    if (e.closest('[data-testid="stDataFrame"], .js-plotly-plot, [data-testid="stExpanderDetails"]'))
      return;
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && r.right > width + 1) {
      const what = (e.getAttribute('data-testid') || e.tagName) + ' "'
                   + (e.innerText || '').trim().slice(0, 30) + '"';
      if (!seen.has(what)) { seen.add(what); problems.push(`${what} runs past the screen's `
                                                           + `right edge (${Math.round(r.right)} px)`); }
    }
  });
  return problems.slice(0, 8);
}"""


def phone_problems(page, slug: str) -> list[str]:
    """On a phone (PHONE): the question, then Run, then the main chart, then the settings; the
    question, Run, the takeaway and the main chart's plot area inside the first screen; and
    nothing past the screen's right edge."""
    return page.evaluate(PHONE_ORDER, slug)


def visual_problems(page) -> list[str]:
    """What a reader would trip over: chart texts (titles, axis titles, legends, annotations)
    overlapping each other, tables whose columns do not fit, an exception box."""
    return page.evaluate(VISUAL_PROBLEMS)


AXE_RUN = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
    where: v.nodes.slice(0, 3).map(n => n.target.join(' ').slice(-90)),
    why: (v.nodes[0].failureSummary || '').split('\\n').slice(1, 2).join('').trim()}));
}"""


def axe_violations(page, label: str) -> list[dict]:
    """axe-core's violations on the page as it stands (AXE_TAGS: WCAG 2.1 A and AA, and its best
    practices), each printed as a line under `label` (the test output's record per page)."""
    page.add_script_tag(path=str(AXE_JS))
    found = page.evaluate(AXE_RUN, AXE_TAGS)
    print(
        f"axe-core on {label}: {len(found)} violation(s)"
        + "".join(
            f"\n  {v['impact']} {v['id']} x{v['count']}: {v['help']} — {v['why']} at {'; '.join(v['where'])}"
            for v in found
        ),
        flush=True,
    )
    return found


def axe_problems(page, label: str, tries: int = 3) -> list[str]:
    """The serious and critical axe-core violations, as problems (axe_violations), once the page
    has settled. A violation counts only if it is still there after up to `tries` looks 0.75 s
    apart: a polling fragment (the sidebar's, while the worker starts) can dim its elements for
    a moment mid-look, and a dimmed caption fails colour contrast; a real violation stays."""
    for attempt in range(tries):
        settled(page)
        problems = [
            f"axe-core {v['impact']} {v['id']} x{v['count']}: {v['help']} ({v['why']}) "
            f"at {'; '.join(v['where'])}"
            for v in axe_violations(page, label)
            if v["impact"] in AXE_FAILING
        ]
        if not problems or attempt == tries - 1:
            return problems
        page.wait_for_timeout(750)
    return problems
