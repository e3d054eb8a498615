"""Markdown tables from a probe report (what `interp/probes/README.md` quotes).

python -m interp.probes.summary runs/probes/smollm2-135m/report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _f(x, digits=3):
    return "-" if x is None else f"{x:.{digits}g}" if isinstance(x, float) else str(x)


def summarize(report: dict) -> str:
    m, s = report["massive"], report["sinks"]
    lines = [
        f"### {report['model'].get('name')}  ({report['corpus']['n_seq']} x {report['corpus']['ctx_len']} tokens of "
        f"{report['corpus']['source']}; scan of {m['n_seq']} sequences)",
        "",
    ]
    lines += [
        "| layer | max abs h | median abs h | ratio | top channel @ position (token) | Sun-massive entries | entries "
        "> ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for x in m["layers"]:
        t = x["top"][0]
        lines.append(
            f"| {x['layer']} | {x['max_abs']:.1f} | {x['median_abs']:.3f} | {x['ratio']:.0f} | "
            f"{t['channel']} @ {t['pos']} ({json.dumps(t['token'])}) | {x['n_massive']} | {x['n_over_ratio']} |"
        )
    for kind in ("massive", "over_ratio"):
        w = m[kind]
        lines += [
            "",
            f"**{kind}** entries: {w['n_entries']}, layers {w['first_layer']}..{w['last_layer']}, "
            f"channels {w['channels']}, positions {w.get('positions')}, share at position 0 "
            f"{_f(w.get('share_at_position_0'))}, tokens {json.dumps(w.get('tokens'), ensure_ascii=False)}",
        ]
        cv = [c for c in w.get("constancy", []) if c["position"] == 0]
        if cv:
            lines.append(
                "constancy at position 0 (CV across sequences): "
                + ", ".join(
                    f"L{c['layer']}/ch{c['channel']}: mean {c['mean']:.1f}, CV {c['cv']:.3f}"
                    for c in cv[:: max(1, len(cv) // 6)]
                )
            )
    gu = report["gu"]
    lines += [
        "",
        f"**Sinks** (eps {s['eps']}): Sink_1 natural {100 * gu['natural']['sink_fraction']:.1f}%, "
        f"random {100 * gu['random']['sink_fraction']:.1f}%, repeated token {100 * gu['repeat']['sink_fraction']:.1f}% "
        f"(T = {report['config']['gu_len']}); on the scan rows (T = {report['config']['ctx_len']}): "
        f"{100 * s['sink_fraction']:.1f}%, mean alpha_1 {s['mean_alpha_first']:.3f}",
        "Sink_1 per layer: " + ", ".join(f"{x:.2f}" for x in s["sink_fraction_per_layer"]),
        f"Other sink tokens: {json.dumps(s['other_sinks']['tokens'], ensure_ascii=False)}",
    ]
    a = report.get("ablations")
    if a:
        lines += ["", f"| intervention at layer {a['layer']} ({a['criterion']}) | perplexity |", "|---|---|"]
        for k in ("original", "zero", "mean", "random", "pos0_mean"):
            if k in a:
                lines.append(f"| {k} | {a[k]['ppl']:.3f} |")
    st = report.get("streaming")
    if st:
        lines += [
            "",
            f"| StreamingLLM, ctx {st['ctx']}, window {st['window']} (targets >= window) | perplexity |",
            "|---|---|",
        ]
        for k, v in st.items():
            if isinstance(v, dict):
                lines.append(f"| {k} | {v['ppl']:.3f} |")
    co = report["cooccurrence"]
    lines += ["", f"**Co-occurrence**: {json.dumps(co['overlap'])}; heads: {json.dumps(co['heads'])}"]
    kv = co["key_value"]
    lines.append(
        "key/value at position 0 vs others (layers "
        + ", ".join(str(k["layer"]) for k in kv[:: max(1, len(kv) // 5)])
        + "): "
        + "; ".join(
            f"L{k['layer']}: |k0| {k['key_norm_first']:.2f} vs {k['key_norm_other']:.2f}, cos(q,k0) "
            f"{k['cos_q_key_first']:.2f} vs "
            f"{k['cos_q_key_other']:.2f}, |v0| {k['value_norm_first']:.2f} vs {k['value_norm_other']:.2f}"
            for k in kv[:: max(1, len(kv) // 5)]
        )
    )
    if "cross" in co:
        lines += [
            "",
            "| cross ablation | Sink_1 | mean alpha_1 | max ratio | max abs h | Sun-massive entries |",
            "|---|---|---|---|---|---|",
        ]
        for k, v in co["cross"].items():
            if isinstance(v, dict):
                lines.append(
                    f"| {k} | {100 * v['sink_fraction']:.1f}% | {v['mean_alpha_first']:.3f} | {v['max_ratio']:.0f} | "
                    f"{v['max_abs']:.1f} | {v['n_massive']} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    for path in sys.argv[1:] or ["runs/probes/smollm2-135m/report.json"]:
        print(summarize(json.loads(Path(path).read_text())))
        print()
