"""Every page's own styles and its keyboard skip link, drawn first by app.py, and presentation
mode's large type and layout, which `PageLink` adds to a page in that mode.
"""

from __future__ import annotations

import streamlit as st

# every page (app.py): captions dark enough for WCAG AA on white and on the sidebar's grey
# (Streamlit's own grey, faded to 60 %, is 2.6:1 there), answered (disabled) choices as readable as
# open ones, the one chosen in bold (its grey dot alone is faint);
# section headings are h2 under the page's h1 (in order), drawn at Streamlit's h3 size; less
# empty space above the title (Streamlit's 6rem), so the first screen reaches the charts; on a
# phone (no hover to summon it) no plotly toolbar over every chart; the skip link (SKIP_LINK)
# hidden until the keyboard reaches it; tighter gaps and boxes, and the takeaway lifted above its
# chart, so that a 1280x720 screen holds the question, Run, the takeaway and the main chart
BASE_CSS = """
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p, .stCaption {
  color: #595D69 !important; opacity: 1 !important; }
[data-testid="stRadio"] label:has(input:disabled), [data-testid="stRadio"] label:has(input:disabled) p {
  color: #31333F !important; opacity: 1 !important; }
[data-testid="stRadioOption"][data-selected="true"][data-disabled="true"] p { font-weight: 600; }
[data-testid="stMainBlockContainer"] h2 { font-size: 1.5rem; padding: 0.75rem 0 0.5rem; }
#bsdemo-skip { position: absolute; left: -10000px; top: 0.5rem; z-index: 1000100; }
#bsdemo-skip:focus { left: 0.5rem; background: #FFFFFF; color: #0072B2; padding: 0.5rem 1rem;
  border: 2px solid #0072B2; border-radius: 0.5rem; font-weight: 600; }
[data-testid="stMainBlockContainer"] { padding-top: 1.75rem; }
[data-testid="stMainBlockContainer"] h1 { font-size: 2.1rem; padding-bottom: 0.25rem; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
[data-testid="stMainBlockContainer"] [data-testid="stAlert"] [role="alert"] {
  padding: 0.6rem 0.9rem; }
/* the "Predict first" question and its answers (header.predict) in one tinted box */
[class*="st-key-predict_"] { background: #E8F1FB; border-radius: 0.5rem; padding: 0.45rem 0.9rem; }
[class*="st-key-predict_"] [data-testid="stWidgetLabel"] p { font-size: 1rem; color: #0B3A66; }
/* the main takeaway (widgets.takeaway) above the chart it closes: the first screen's answer */
[data-testid="stLayoutWrapper"]:has(> .st-key-takeaway) { order: -1; }
@media (max-width: 640px), (hover: none) { .modebar-container { display: none !important; } }
@media (max-width: 640px) { [data-testid="stMainBlockContainer"] h1 { font-size: 1.7rem; } }
/* a lesson on a phone: the question, Run and the results first, the folded settings under them,
   then the rest of the page (PageLink.areas keys the two) */
@media (max-width: 640px) {
[data-testid="stLayoutWrapper"]:has(> .st-key-lesson_results) ~ * { order: 2; }
[class*="st-key-settings_"] { order: 1; }
}
"""  # the Lab's own phone layout: bsdemo/ui/lab_phone.css

# large type everywhere (Streamlit sizes in rem), the page's full width, no header strip; and
# tighter around the large type (title, the prediction box, the gaps, the figures' tiles), so
# the main chart starts on a 1280x720 projector's first screen
PRESENT_CSS = """
html { font-size: 22px; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 2.2rem 2.5rem 3rem; }
[data-testid="stHeader"] { background: transparent; }
[data-testid="stCaptionContainer"], .stCaption { color: #222222 !important; }
[data-testid="stMainBlockContainer"] h1 { font-size: 2rem; padding: 0 0 0.25rem; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
[data-testid="stMainBlockContainer"] [data-testid="stAlert"] [role="alert"] {
  padding: 0.45rem 0.8rem; }
[data-testid="stMetricValue"] { font-size: 1.6rem; }
/* a landscape screen: the question, Run and the takeaway in a column beside the page's main
   chart (widgets.show_chart(main=True)), the rest of the results under both: a grid over the
   results, in which the blocks holding the main chart take no box of their own */
@media (min-width: 1000px) {
.st-key-present_results { display: grid !important; align-items: start;
  grid-template-columns: minmax(0, 2fr) minmax(0, 3fr); column-gap: 1.5rem; }
.st-key-present_results [data-testid] { grid-column: 1 / -1; }
.st-key-present_results :is([data-testid="stLayoutWrapper"], [data-testid="stVerticalBlock"],
  [data-testid="stHorizontalBlock"], [data-testid="stColumn"]):has(* .st-key-main_chart) {
  display: contents; }
.st-key-present_results > [class*="st-key-predict_"] { grid-column: 1; grid-row: 1; }
.st-key-present_results > [class*="st-key-predict_"] + * { grid-column: 1; grid-row: 2; }
.st-key-present_results [data-testid="stLayoutWrapper"]:has(> .st-key-takeaway) {
  grid-column: 1; grid-row: 3; }
.st-key-present_results [data-testid="stLayoutWrapper"]:has(> .st-key-main_chart) {
  grid-column: 2; grid-row: 1 / span 4; }
/* the Lab's Run and Stop keep their words in that column; what the settings mean wraps */
.st-key-present_results [data-testid="stHorizontalBlock"]:has(.st-key-run)
  > [data-testid="stColumn"]:nth-child(-n+2) { flex: 0 0 auto; width: auto; min-width: 0; }
}
"""


# the keyboard's first stop on every page (WCAG 2.4.1): a link, hidden until focused, that moves
# the focus past the sidebar to the page's prediction (the next Tab reaches Run) or, where the
# page asks nothing, to Run, or else to the page's first control. Added once to the document
# (the script runs again on each page's draw, and finds it there).
SKIP_LINK = """<script>
(() => {
  if (document.getElementById('bsdemo-skip')) return;
  const nav = document.createElement('nav');  // a landmark of its own, as axe-core asks
  nav.setAttribute('aria-label', 'Skip the navigation');
  const link = document.createElement('a');
  nav.appendChild(link);
  link.id = 'bsdemo-skip'; link.href = '#'; link.textContent = 'Skip to the page';
  const QUESTION = '[class*="st-key-predict_"] input[type=radio]:not(:disabled)';
  const RUN = '.st-key-run button:not(:disabled), button[kind="primary"]:not(:disabled)';
  const find = selector => {
    const main = document.querySelector('[data-testid="stMain"]');
    return main && main.querySelector(selector); };
  link.addEventListener('focus', () => {  // named for what this page has now
    link.textContent = find(QUESTION) ? 'Skip to the question and Run'
                       : find(RUN) ? 'Skip to Run' : 'Skip to the page'; });
  link.addEventListener('click', event => {
    event.preventDefault();
    const target = find(QUESTION) || find(RUN) || find('button, input, a[href], [tabindex="0"]');
    if (target) target.focus();
  });
  document.body.insertBefore(nav, document.body.firstChild);
})();
</script>"""


def page_base() -> None:
    """Every page's styles (BASE_CSS) and its skip link (SKIP_LINK): drawn by app.py first."""
    st.html(f"<style>{BASE_CSS}</style>{SKIP_LINK}", unsafe_allow_javascript=True)
