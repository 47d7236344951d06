// frames-dspy report.html: renders the rows of the embedded JSON a page at a time.
// No network, no libraries. Row anchors: #row=<condition>/<id> (run B: #row=B:<condition>/<id>).
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const Q = DATA.questions;
  const ROWS = DATA.rows;
  const TWO = DATA.runs.length > 1;
  const PAGE = 50;
  const state = { page: 0, open: new Set(), target: null, shown: ROWS };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const key = (r) => (r.run ? "B:" : "") + r.c + "/" + r.i;
  const fmt = (v, d) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));
  const goldBin = (n) => (n === null || n === undefined ? "?" : n >= 6 ? "6+" : String(n));
  const aicText = (r) => (r.aic === true ? "yes" : r.aic === false ? "no" : r.nc ? "no context" : "not checked");
  const found = (r) => r.g.filter((x) => x !== null).length;
  // Step outcomes of a malformed call (frames_dspy.programs.trajectory.MALFORMED).
  const MALFORMED = new Set(DATA.malformed || []);

  // Lower-cased text each row is searched in, built once.
  const HAY = ROWS.map((r) => {
    const q = Q[r.i] || [];
    return [q[0], q[1], (q[4] || []).join(" "), r.a, r.x, r.e || "", r.m || "",
      r.q.flat().join(" "), (r.tj || []).map((t) => t[1]).join(" "), r.c, r.i].join("\n").toLowerCase();
  });

  // --- filters ------------------------------------------------------------------------------
  const uniq = (xs) => Array.from(new Set(xs));
  const conditions = uniq(ROWS.map((r) => r.c));
  const types = uniq(ROWS.flatMap((r) => (Q[r.i] || [])[2] || [])).sort();
  const bins = uniq(ROWS.map((r) => goldBin((Q[r.i] || [])[3]))).sort();
  const FILTERS = [
    ["run", "run", TWO ? ["A", "B"] : null, (r, v) => (v === "A" ? r.run === 0 : r.run === 1)],
    ["condition", "condition", conditions, (r, v) => r.c === v],
    ["outcome", "outcome", DATA.outcomes, (r, v) => r.o === v],
    ["type", "reasoning type", types, (r, v) => ((Q[r.i] || [])[2] || []).includes(v)],
    ["source", "verdict by", ["rule", "lm", "none"], (r, v) => r.src === v],
    ["ngold", "gold articles", bins, (r, v) => goldBin((Q[r.i] || [])[3]) === v],
    ["aic", "answer in context", ["yes", "no", "not checked", "no context"], (r, v) => aicText(r) === v],
  ].filter((f) => f[2]);

  const box = document.getElementById("filters");
  for (const [id, label, values] of FILTERS) {
    const select = el("select", { id: "f-" + id, on: { change: apply } },
      el("option", { value: "", text: "all" }), values.map((v) => el("option", { value: v, text: v })));
    box.append(el("label", {}, label, select));
  }
  box.append(el("label", {}, "search", el("input", {
    id: "f-search", type: "search", placeholder: "question, answer, query, title…",
    on: { input: apply },
  })));
  box.append(el("button", { id: "f-reset", type: "button", text: "reset", on: { click: reset } }));

  function apply() {
    const chosen = FILTERS.map((f) => [f, document.getElementById("f-" + f[0]).value])
      .filter(([, v]) => v !== "");
    const words = document.getElementById("f-search").value.toLowerCase().split(/\s+/).filter(Boolean);
    state.shown = ROWS.filter((r, n) => chosen.every(([f, v]) => f[3](r, v))
      && words.every((w) => HAY[n].includes(w)));
    state.page = 0;
    draw();
  }
  function reset() {
    for (const f of FILTERS) document.getElementById("f-" + f[0]).value = "";
    document.getElementById("f-search").value = "";
    apply();
  }

  // --- rows ---------------------------------------------------------------------------------
  const pager = document.getElementById("pager");
  const list = document.getElementById("rows");

  function detail(r) {
    const q = Q[r.i] || [];
    const titles = q[4] || [];
    const grid = el("div", { class: "detail-grid" });
    const add = (label, value) => grid.append(el("div", { text: label }), el("div", {}, value));
    add("question", el("pre", { text: q[0] }));
    add("gold answer", el("pre", { text: q[1] }));
    add("answer", el("pre", { text: r.a || "(empty)" }));
    add("verdict", `${r.o} — by ${r.src === "rule" ? "rule " + r.m : r.src === "lm" ? "the LM judge" : "nobody"}`
      + (r.p === null || r.p === undefined ? "" : `, P(TRUE) ${fmt(r.p, 3)}`));
    if (r.x) add(r.src === "rule" ? "rule says" : "judge says", el("pre", { text: r.x }));
    add("reasoning types", (q[2] || []).join(", ") || "—");
    add("answer in context", el("span", { class: r.aic === true ? "yes" : r.aic === false ? "no" : "muted", text: aicText(r) }));
    const gold = el("ul", { class: "gold" });
    // An agent's rounds are its steps: a gold article is read at a step, or only shown by a search.
    const goldText = (round, n) => (r.tj
      ? (round ? `read at step ${round}` : r.gs && r.gs[n] ? `shown by the search at step ${r.gs[n]}, not read` : "never shown")
      : round ? `found in round ${round}` : r.nc ? "no retrieval" : "missed");
    r.g.forEach((round, n) => gold.append(el("li", { class: round ? "found" : r.nc && !r.tj ? "muted" : "missed" },
      `${titles[n] || r.gi[n]}: `, goldText(round, n))));
    if (!r.g.length) gold.append(el("li", { class: "muted", text: q[3] ? `none of the ${q[3]} gold articles is in the corpus` : "no gold articles" }));
    add(`gold articles (${found(r)}/${r.g.length} found)`, gold);
    if (r.rc && r.rc.length) add(r.tj ? "recall per step" : "recall per round", r.rc.map((x) => fmt(x, 2)).join(" → "));
    if (r.tj) {
      const steps = el("ol", { class: "trajectory" });
      r.tj.forEach(([action, arg, outcome, seen, tokens]) => steps.append(el("li", { class: MALFORMED.has(outcome) ? "malformed" : outcome === "ok" ? null : "miss" },
        el("b", { text: action || "(unreadable reply)" }), arg ? ` ${arg}` : "", " → ", seen || "—",
        outcome === "ok" ? "" : ` [${outcome.replaceAll("_", " ")}]`, el("span", { class: "muted", text: ` · ${tokens} tokens` }))));
      add(`trajectory (${r.tj.length} steps, stopped by ${r.sr || "?"})`, steps);
    } else {
      const queries = el("ol", { class: "queries" });
      r.q.forEach((round) => queries.append(el("li", { text: round.join(" | ") || "(none)" })));
      add("queries per round", r.q.length ? queries : "—");
    }
    if (r.nr !== null && r.nr !== undefined) add("near-repeated queries", fmt(r.nr, 2));
    if (r.pk) add("packing", `${r.pk[0]} articles, ${r.pk[1]} cut, ${r.pk[2]} tokens`);
    add("tokens", `${r.t} program, metered (${r.lc} LM calls, ${r.cc} cached, ${r.rt} retries; ${r.rp} as the LM reported them), ${r.jt} judge`);
    add("seconds", fmt(r.s, 2));
    if (r.e) add("error", el("pre", { class: "no", text: r.e }));
    add("link", el("a", { href: "#row=" + encodeURIComponent(key(r)), text: "#row=" + key(r) }));
    return grid;
  }

  function draw() {
    const shown = state.shown;
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    pager.replaceChildren(
      el("span", { class: "count" }, el("span", { id: "count", text: shown.length }), ` of ${ROWS.length} rows`),
      el("button", { id: "prev", type: "button", text: "‹ prev", disabled: state.page === 0, on: { click: () => { state.page--; draw(); } } }),
      el("span", { id: "page-info", text: `page ${state.page + 1} of ${pages}` }),
      el("button", { id: "next", type: "button", text: "next ›", disabled: state.page >= pages - 1, on: { click: () => { state.page++; draw(); } } }),
    );
    const head = el("tr", {}, ["", TWO ? "run" : null, "id", "condition", "outcome", "question", "gold", "answer",
      "in context", "gold found", "tokens", "s"].filter((h) => h !== null).map((h) => el("th", { text: h })));
    const widths = ["2%", TWO ? "3%" : null, "4%", "10%", "7%", "28%", "12%", "16%", "8%", "5%", "5%", "4%"].filter((w) => w !== null);
    const table = el("table", { class: "rows" }, el("colgroup", {}, widths.map((w) => el("col", { style: "width:" + w }))),
      el("thead", {}, head));
    const body = el("tbody");
    for (const r of shown.slice(state.page * PAGE, (state.page + 1) * PAGE)) {
      const k = key(r);
      const q = Q[r.i] || [];
      const tr = el("tr", { class: "row" + (state.target === k ? " target" : ""), id: "row-" + k, "data-key": k,
        on: { click: (ev) => { if (ev.target.tagName !== "A") toggle(k); } } },
        el("td", {}, el("a", { href: "#row=" + encodeURIComponent(k), title: "link to this row", text: "¶" })),
        TWO ? el("td", { text: r.run ? "B" : "A" }) : null,
        el("td", { text: r.i }), el("td", { text: r.c }),
        el("td", {}, el("span", { class: "badge o-" + r.o.replace(" ", "-"), text: r.o })),
        el("td", { text: q[0], title: q[0] }), el("td", { text: q[1], title: q[1] }),
        el("td", { text: r.a, title: r.a }),
        el("td", { class: r.aic === true ? "yes" : r.aic === false ? "no" : "muted", text: aicText(r) }),
        el("td", { text: r.g.length && !r.nc ? `${found(r)}/${r.g.length}` : "—" }),
        el("td", { text: r.t }), el("td", { text: fmt(r.s, 1) }));
      body.append(tr);
      if (state.open.has(k)) body.append(el("tr", { class: "detail", id: "detail-" + k }, el("td", { colspan: widths.length }, detail(r))));
    }
    table.append(body);
    list.replaceChildren(table);
  }

  function toggle(k) {
    if (state.open.has(k)) state.open.delete(k); else state.open.add(k);
    draw();
  }

  // --- anchors ------------------------------------------------------------------------------
  function openFromHash() {
    const m = /^#row=(.+)$/.exec(window.location.hash);
    if (!m) return;
    const k = decodeURIComponent(m[1]);
    if (!ROWS.some((r) => key(r) === k)) return;
    if (!state.shown.some((r) => key(r) === k)) reset();
    state.page = Math.floor(state.shown.findIndex((r) => key(r) === k) / PAGE);
    state.open.add(k);
    state.target = k;
    draw();
    document.getElementById("row-" + k).scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", openFromHash);

  // --- two runs: the flipped questions under the comparison's intervals ------------------------
  function comparison(c) {
    const section = document.getElementById("comparison");
    const ci = (x) => (x ? `[${fmt(x[0], 3)}, ${fmt(x[1], 3)}]` : "—");
    const signed = (v) => (v === null || v === undefined ? "—" : (v >= 0 ? "+" : "") + Number(v).toFixed(3));
    section.append(el("h2", { text: "Run B against run A, question by question (python -m frames_dspy.compare)" }));
    for (const w of c.warnings || []) section.append(el("p", { class: "warning", text: w }));
    const head = ["A", "B", "paired n", "accuracy A", "accuracy B", "B - A [95% CI]", "McNemar p",
      "final recall B - A [95% CI]", "round-1 recall B - A [95% CI]", "tokens/q A → B", "verdict"];
    section.append(el("table", { class: "pairs" }, el("tr", {}, head.map((h) => el("th", { text: h }))),
      c.pairs.map((p) => el("tr", {}, [p.condition_a, p.condition_b, p.n, fmt(p.accuracy_a, 3), fmt(p.accuracy_b, 3),
        `${signed(p.accuracy_diff)} ${ci(p.accuracy_ci95)}`, fmt(p.mcnemar_p, 4),
        `${signed(p.recall_final_diff)} ${ci(p.recall_final_ci95)}`, `${signed(p.recall_round1_diff)} ${ci(p.recall_round1_ci95)}`,
        `${fmt(p.tokens_per_q_a, 0)} → ${fmt(p.tokens_per_q_b, 0)}`, p.verdict].map((v) => el("td", { text: v }))))));
    const byKey = new Map(ROWS.map((r) => [key(r), r]));
    const card = (p, id) => {
      const a = byKey.get(`${p.condition_a}/${id}`);
      const b = byKey.get(`B:${p.condition_b}/${id}`);
      const side = (r, label) => el("div", {},
        el("a", { href: "#row=" + encodeURIComponent(r ? key(r) : ""), text: label }), ": ",
        r ? el("span", { class: r.o === "correct" ? "yes" : "no", text: r.o }) : "—", " ", r ? r.a : "");
      const q = Q[String(id)] || [];
      return el("div", { class: "flip", "data-id": id }, el("div", { class: "q", text: `${id}. ${q[0] || ""}` }),
        el("div", { class: "muted", text: "gold: " + (q[1] || "") }), el("div", { class: "side" }, side(a, "A"), side(b, "B")));
    };
    // Every card is in the page; with many flips, the pairs start folded.
    const many = c.pairs.reduce((n, p) => n + p.a_to_b.count + p.b_to_a.count, 0) > 200;
    for (const p of c.pairs) {
      section.append(el("details", { open: !many }, el("summary", {},
        el("h3", { style: "display:inline", text: `${p.condition_a} (A) → ${p.condition_b} (B): ${p.a_to_b.count} + ${p.b_to_a.count} flipped` })),
      el("div", { class: "flips" },
        el("div", { class: "flips-a-to-b" }, el("h3", { text: `A wrong, B right (${p.a_to_b.count})` }), p.a_to_b.ids.map((id) => card(p, id))),
        el("div", { class: "flips-b-to-a" }, el("h3", { text: `A right, B wrong (${p.b_to_a.count})` }), p.b_to_a.ids.map((id) => card(p, id))))));
    }
  }

  if (DATA.comparison) comparison(DATA.comparison);
  draw();
  openFromHash();
  document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
  document.body.setAttribute("data-ready", "1");
})();
