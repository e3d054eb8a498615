"""Chart labels stay inside the chart and clear of each other, measured in headless Chromium (the y-axis
top tick of a log-scale count histogram over a 262k-token vocabulary used to be cut at the left edge)."""

import shutil
import subprocess

import pytest

from interp.dashboards import svg
from interp.dashboards.page import CSS

_PROBE = """<script>
const bad = [];
document.querySelectorAll("svg").forEach((s, k) => {
  const r = s.getBoundingClientRect(), w = Number(s.getAttribute("viewBox").split(" ")[2]), sc = r.width / w;
  const boxes = [...s.querySelectorAll("text")].map(t => {
    const b = t.getBoundingClientRect();
    return {t: t.textContent, x0: (b.left - r.left) / sc, x1: (b.right - r.left) / sc,
            y0: (b.top - r.top) / sc, y1: (b.bottom - r.top) / sc};
  });
  const h = r.height / sc;
  for (const b of boxes)
    if (b.x0 < -0.5 || b.y0 < -0.5 || b.x1 > w + 0.5 || b.y1 > h + 0.5) bad.push(k + " outside: " + b.t);
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1) bad.push(k + " overlap: " + a.t + " / " + b.t);
  }
});
document.title = bad.length ? bad.join(" | ") : "ok";
</script>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (installed by the Makefile)")
def test_axis_labels_are_inside_the_chart_and_do_not_overlap(tmp_path):
    charts = [
        svg.bars([-14.4, 0.0, 14.4], [3, 262_144], title="logit effect", xlabel="effect on logit", log_y=True),
        svg.bars([-1.0, 0.0, 1.0], [3, 41_780], title="logit effect", xlabel="effect on logit", log_y=True),
        svg.bars([0.0, 1.0, 3.44], [99, 12], title="activation histogram", xlabel="activation"),
        svg.columns([0.641, 0.2], title="firing rate by position", xlabel="position", ylabel="rate"),
    ]
    page = tmp_path / "c.html"
    page.write_text(
        f"<html><head><style>{CSS} svg.chart {{ width: 480px; }}</style></head><body><div class='idash'>"
        + "".join(charts)
        + "</div>"
        + _PROBE
        + "</body></html>"
    )
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p'}", "--dump-dom"]
        + [f"file://{page}"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert dom.split("<title>", 1)[1].split("</title>", 1)[0] == "ok", dom.split("<title>", 1)[1][:400]
    assert 'text-anchor="end">2.62e+05<' in charts[0] and 'text-anchor="end">41780<' in charts[1]  # in full below 1e5


def test_count_ticks_are_whole_numbers_below_1e5():
    assert svg._fmt_count(4178.0) == "4178" and svg._fmt_count(0.641) == "0.641" and svg._fmt_count(2e5) == "2e+05"
