// zkfle's election timeline. Written for this page alone (no library, works offline): the data
// is the decode's records in the JSON-lines contract and the summary's JSON, embedded above.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("zkfle-data").textContent);
  const S = D.summary || {};
  // Non-members (probes) asked for votes: not servers of the ensemble, no lane of their own.
  const outsiders = new Set((S.non_members || []).map((n) => String(n.sid)));
  const outside = (r) => outsiders.has(String(r.from_sid)) || outsiders.has(String(r.to_sid));
  const recs = (D.records || []).filter((r) => !outside(r));
  // Config texts are stored once each; put them back into the notifications.
  for (const r of recs) {
    if (r.config_ref !== undefined) { r.config = (D.configs || [])[r.config_ref]; delete r.config_ref; }
  }
  const $ = (id) => document.getElementById(id);
  const canvas = $("canvas"), tip = $("tip"), counts = $("zkfle-counts");
  const ctx = canvas.getContext("2d");
  // `#drawlog`: each drawing call of the last draw, with its arguments and the fill colour in
  // force, kept for tests that rebuild what was drawn from the calls (tests/visual.rs).
  const drawlog = /drawlog/.test(location.hash) ? [] : null;
  if (drawlog) {
    let nextPath = 1;
    const pathId = (p) => p.__zk || (p.__zk = nextPath++);
    const wrap = (obj, names, on) => {
      for (const m of names) {
        const orig = obj[m];
        obj[m] = function (...a) {
          drawlog.push({ on: on(this), op: m, args: a.map((x) => (x instanceof Path2D ? pathId(x) : x)), fill: String(ctx.fillStyle) });
          return orig.apply(this, a);
        };
      }
    };
    wrap(Path2D.prototype, ["moveTo", "lineTo", "closePath"], pathId);
    wrap(ctx, ["beginPath", "moveTo", "lineTo", "closePath", "fillRect", "fillText", "fill", "stroke"], () => 0);
  }

  // ---- lanes: one per server (its sid), or per address when the sid is unknown ----
  const laneIndex = new Map();
  const lanes = [];
  function laneKey(sid, addr) { return sid !== null && sid !== undefined ? "s" + sid : "a" + (addr || "unknown"); }
  function lane(sid, addr) {
    const k = laneKey(sid, addr);
    let i = laneIndex.get(k);
    if (i === undefined) {
      i = lanes.length;
      laneIndex.set(k, i);
      lanes.push({ key: k, sid: sid === undefined ? null : sid, label: sid !== null && sid !== undefined ? "sid " + sid : (addr || "unknown") });
    }
    return i;
  }
  const isMsg = (r) => r.type === "initial" || r.type === "notification";
  for (const r of recs) {
    if (!isMsg(r)) continue;
    lane(r.from_sid, r.src);
    lane(r.to_sid, r.dst);
  }
  for (const r of S.rounds || []) for (const d of r.decisions || []) lane(d.sid, null);
  // Servers in sid order, then addresses.
  const order = lanes.map((l, i) => i).sort((a, b) => {
    const A = lanes[a], B = lanes[b];
    if ((A.sid === null) !== (B.sid === null)) return A.sid === null ? 1 : -1;
    // Sids beyond 2^53 come as strings (exact); BigInt orders both forms.
    if (A.sid !== null) { const c = BigInt(A.sid) - BigInt(B.sid); return c < 0n ? -1 : c > 0n ? 1 : 0; }
    return A.label < B.label ? -1 : A.label > B.label ? 1 : 0;
  });
  const row = new Int32Array(lanes.length);
  order.forEach((li, pos) => { row[li] = pos; });

  // ---- messages: one arrow each, sorted by time ----
  const msgs = [];
  const problems = [];
  let tMin = Infinity, tMax = -Infinity;
  for (const r of recs) {
    if (typeof r.time === "number") { tMin = Math.min(tMin, r.time); tMax = Math.max(tMax, r.time); }
    if (isMsg(r)) msgs.push(r); else if (r.type === "error") problems.push(r);
  }
  msgs.sort((a, b) => a.time - b.time);
  for (const r of S.rounds || []) {
    for (const t of [r.started].concat((r.decisions || []).map((d) => d.time))) {
      if (typeof t === "number") { tMin = Math.min(tMin, t); tMax = Math.max(tMax, t); }
    }
  }
  if (!isFinite(tMin)) { tMin = 0; tMax = 1; }
  if (tMax - tMin < 1e-3) tMax = tMin + 1e-3;
  // Times are relative to the text summary's anchor (the first record), as in its lines.
  const T0 = typeof D.t0 === "number" ? D.t0 : tMin;
  const N = msgs.length;
  const mt = new Float64Array(N), mfrom = new Int32Array(N), mto = new Int32Array(N), mcol = new Int32Array(N);
  const mdash = new Uint8Array(N);
  const colours = [], colourIndex = new Map();
  function colourOf(key, css) {
    let i = colourIndex.get(key);
    if (i === undefined) { i = colours.length; colourIndex.set(key, i); colours.push({ key, css }); }
    return i;
  }
  function leaderCss(leader) {
    if (leader === null || leader === undefined) return "#888";
    if (leader < -1e15) return "#111"; // Long.MIN_VALUE: an observer proposes no leader
    const h = (((leader * 137.508) % 360) + 360) % 360;
    return "hsl(" + h.toFixed(0) + ",70%,42%)";
  }
  for (let i = 0; i < N; i++) {
    const r = msgs[i];
    mt[i] = r.time;
    mfrom[i] = lane(r.from_sid, r.src);
    mto[i] = lane(r.to_sid, r.dst);
    if (r.type === "notification") {
      mcol[i] = colourOf("leader " + r.leader, leaderCss(r.leader));
      mdash[i] = r.state === "LOOKING" ? 0 : 1;
    } else {
      mcol[i] = colourOf("initial", "#999");
    }
  }

  // ---- state bands: each server's states as the summary tells them (S.states) ----
  const tEnd = tMax;
  const rounds = S.rounds || [];
  const bands = lanes.map(() => []); // {s, e, state}
  for (const st of S.states || []) {
    const li = laneIndex.get("s" + st.sid);
    if (li !== undefined && typeof st.from === "number" && typeof st.to === "number") bands[li].push({ s: st.from, e: st.to, state: st.state });
  }
  // Elections are numbered as the summary numbers them: rejoins are not elections.
  const electionNumber = [];
  { let n = 0; for (const r of rounds) electionNumber.push(r.kind === "election" ? ++n : null); }
  // What a round is called: elections by their number; rejoins and reconfig handovers by kind.
  const roundName = (r, i) => r.kind === "election" ? "election " + electionNumber[i] : r.kind;
  const roundEnd = (i) => {
    const r = rounds[i];
    const last = (r.decisions || []).reduce((m, d) => Math.max(m, d.time), r.started);
    const next = rounds.slice(i + 1).find((x) => x.started > last);
    return next ? next.started : Math.max(last, tEnd);
  };
  // Sync phases from the summary's decisions (the quorum port: from the learner's first sync
  // packet to UPTODATE), and when each new leader had its quorum (serving).
  const extra = lanes.map(() => []);
  const num = (v) => (typeof v === "number" && isFinite(v) ? v : null);
  rounds.forEach((r) => {
    for (const d of r.decisions || []) {
      const y = d.sync;
      const li = laneIndex.get("s" + d.sid);
      if (!y || li === undefined || num(y.started) === null) continue;
      const e = num(y.uptodate) !== null ? y.uptodate : num(y.newleader_ack) !== null ? y.newleader_ack : y.started;
      extra[li].push({ s: y.started, e, label: "sync" + (y.mode ? " " + y.mode : ""), obj: y });
    }
    const w = laneIndex.get("s" + r.winner);
    if (num(r.serving) !== null && w !== undefined) extra[w].push({ s: r.serving, e: r.serving, label: "serving", obj: { serving: r.serving } });
  });
  const stateCss = { LOOKING: "#f2c744", FOLLOWING: "#6aa5e8", LEADING: "#3f8f4f", OBSERVING: "#b48ad8", UNKNOWN: "#bbb" };

  // ---- decisions and anomalies ----
  const decisions = [];
  rounds.forEach((r, ri) => (r.decisions || []).forEach((d) => decisions.push({ d, ri, li: lane(d.sid, null) })));
  decisions.sort((a, b) => a.d.time - b.d.time);
  // The anomalies are the summary's; decode errors are listed apart, and drawn nowhere.
  const anomalies = (S.anomalies || []).map((a) => ({ a, t: num(a.time) }));
  const decodeErrors = problems.filter((p) => p.severity === "error");

  // ---- filters ----
  const fServer = $("f-server"), fRound = $("f-round");
  order.forEach((li) => { const o = document.createElement("option"); o.value = String(li); o.textContent = lanes[li].label; fServer.appendChild(o); });
  const epochs = Array.from(new Set(msgs.filter((r) => r.type === "notification").map((r) => r.election_epoch))).sort((a, b) => a - b);
  epochs.forEach((e) => { const o = document.createElement("option"); o.value = String(e); o.textContent = "0x" + e.toString(16); fRound.appendChild(o); });
  let filterLane = -1, filterRound = null;
  function passes(i) {
    if (filterLane >= 0 && mfrom[i] !== filterLane && mto[i] !== filterLane) return false;
    if (filterRound !== null && msgs[i].election_epoch !== filterRound) return false;
    return true;
  }
  function setFilter(laneI, round, zoom) {
    filterLane = laneI;
    filterRound = round;
    fServer.value = laneI >= 0 ? String(laneI) : "";
    fRound.value = round === null ? "" : String(round);
    if (zoom && round !== null) {
      let a = Infinity, b = -Infinity;
      for (let i = 0; i < N; i++) if (passes(i)) { a = Math.min(a, mt[i]); b = Math.max(b, mt[i]); }
      if (isFinite(a)) setView(a - (b - a) * 0.05 - 1e-3, b + (b - a) * 0.05 + 1e-3);
    }
    draw();
  }
  fServer.onchange = () => setFilter(fServer.value === "" ? -1 : Number(fServer.value), filterRound, false);
  fRound.onchange = () => setFilter(filterLane, fRound.value === "" ? null : Number(fRound.value), true);
  $("f-clear").onclick = () => { setFilter(-1, null, false); fit(); };

  // ---- view ----
  let v0 = tMin, v1 = tMax;
  const LEFT = 96, TOP = 46, BOTTOM = 8;
  let W = 0, H = 0, laneH = 40;
  function setView(a, b) {
    const span = Math.max(b - a, 1e-6);
    v0 = a; v1 = a + span;
    draw();
  }
  function fit() { const pad = (tMax - tMin) * 0.02; setView(tMin - pad, tMax + pad); }
  const X = (t) => LEFT + ((t - v0) / (v1 - v0)) * (W - LEFT - 10);
  const Tof = (x) => v0 + ((x - LEFT) / (W - LEFT - 10)) * (v1 - v0);
  const laneY = (li) => TOP + row[li] * laneH + laneH / 2;
  function lowerBound(t) { let lo = 0, hi = N; while (lo < hi) { const m = (lo + hi) >> 1; if (mt[m] < t) lo = m + 1; else hi = m; } return lo; }
  function resize() {
    const dpr = window.devicePixelRatio || 1;
    W = canvas.clientWidth; H = canvas.clientHeight;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    laneH = Math.max(22, (H - TOP - BOTTOM) / Math.max(1, lanes.length));
  }
  function niceStep(span, px) {
    const raw = span / Math.max(1, px / 110);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  function fmtRel(t, step) {
    const d = Math.max(0, Math.min(6, -Math.floor(Math.log10(step))));
    return "+" + (t - T0).toFixed(d) + " s";
  }
  let aggregated = false, lastDrawMs = 0, drawnArrows = 0;
  const hits = { bins: null, binPx: 2 };
  function draw() {
    if (drawlog) drawlog.length = 0;
    const started = performance.now();
    ctx.clearRect(0, 0, W, H);
    ctx.font = "12px system-ui, sans-serif";
    // axis
    const step = niceStep(v1 - v0, W - LEFT);
    ctx.fillStyle = "#666"; ctx.strokeStyle = "#eee"; ctx.lineWidth = 1;
    for (let t = Math.ceil((v0 - T0) / step) * step + T0; t <= v1; t += step) {
      const x = X(t);
      ctx.beginPath(); ctx.moveTo(x + 0.5, TOP - 4); ctx.lineTo(x + 0.5, H); ctx.stroke();
      ctx.fillText(fmtRel(t, step), x + 3, 12);
    }
    const tAxis = performance.now();
    // election starts
    let labelEnd = [-Infinity, -Infinity], lastLine = -Infinity;
    ctx.strokeStyle = "#c0c0c0"; ctx.setLineDash([4, 3]);
    const starts = new Path2D();
    rounds.forEach((r, i) => {
      const x = X(r.started);
      if (x < LEFT || x > W || x - lastLine < 2) return;
      lastLine = x;
      starts.moveTo(x + 0.5, TOP - 12); starts.lineTo(x + 0.5, H);
      const rowi = labelEnd[0] <= labelEnd[1] ? 0 : 1;
      if (x < labelEnd[rowi] + 4) return;
      const text = r.kind === "rejoin" ? "rejoin" : roundName(r, i) + (r.election_epoch >= 0 ? " (round 0x" + Number(r.election_epoch).toString(16) + ")" : "");
      ctx.fillStyle = "#333";
      ctx.fillText(text, x + 3, rowi ? TOP - 14 : TOP - 26);
      labelEnd[rowi] = x + 3 + ctx.measureText(text).width;
    });
    ctx.stroke(starts); ctx.setLineDash([]);
    const tRounds = performance.now();
    // lanes and bands
    for (let li = 0; li < lanes.length; li++) {
      const y = laneY(li), top = y - laneH / 2;
      const dim = filterLane >= 0 && filterLane !== li;
      ctx.fillStyle = row[li] % 2 ? "#fbfbfb" : "#fff";
      ctx.fillRect(LEFT, top, W - LEFT, laneH);
      ctx.strokeStyle = "#ddd"; ctx.beginPath(); ctx.moveTo(LEFT, y + 0.5); ctx.lineTo(W, y + 0.5); ctx.stroke();
      const bandH = Math.min(10, laneH / 4), bandY = y - bandH / 2;
      for (const b of bands[li]) paintBand(b, bandY, bandH, stateCss[b.state] || stateCss.UNKNOWN);
      for (const b of extra[li]) {
        paintBand(b, bandY + bandH + 2, 5, "#8c564b");
        const x = Math.max(LEFT, X(b.s));
        if (X(b.e) - x > 40) { ctx.fillStyle = "#8c564b"; ctx.fillText(b.label, x + 2, bandY + bandH + 18); }
      }
      ctx.fillStyle = dim ? "#aaa" : "#111";
      ctx.fillText(lanes[li].label, 6, y + 4);
    }
    const tLanes = performance.now();
    // messages
    const i0 = lowerBound(v0), i1 = lowerBound(v1 + 1e-9);
    let visible = 0;
    if (filterLane < 0 && filterRound === null) visible = i1 - i0;
    else for (let i = i0; i < i1; i++) if (passes(i)) visible++;
    aggregated = visible > (W - LEFT) * 1.5;
    drawnArrows = 0;
    if (aggregated) drawAggregated(i0, i1); else drawArrows(i0, i1);
    const tMsgs = performance.now();
    // decisions
    const diamonds = new Map();
    const lastDiamond = new Float64Array(lanes.length).fill(-Infinity);
    for (const dm of decisions) {
      const x = X(dm.d.time), y = laneY(dm.li);
      if (x < LEFT - 6 || x > W + 6) continue;
      if (filterLane >= 0 && filterLane !== dm.li) continue;
      // Decisions closer than 2 px on one lane are one diamond (hover shows the first).
      if (Math.abs(x - lastDiamond[dm.li]) < 2) continue;
      lastDiamond[dm.li] = x;
      const css = leaderCss(dm.d.leader);
      let p = diamonds.get(css);
      if (!p) { p = new Path2D(); diamonds.set(css, p); }
      p.moveTo(x, y - 7); p.lineTo(x + 7, y); p.lineTo(x, y + 7); p.lineTo(x - 7, y); p.closePath();
    }
    ctx.strokeStyle = "#000";
    for (const [css, p] of diamonds) { ctx.fillStyle = css; ctx.fill(p); ctx.stroke(p); }
    // anomalies with a time
    for (const am of anomalies) {
      if (am.t === null) continue;
      const x = X(am.t);
      if (x < LEFT - 6 || x > W + 6) continue;
      ctx.fillStyle = "#c00";
      ctx.beginPath(); ctx.moveTo(x, TOP - 12); ctx.lineTo(x + 5, TOP - 3); ctx.lineTo(x - 5, TOP - 3); ctx.closePath(); ctx.fill();
    }
    ctx.fillStyle = "#fff"; ctx.fillRect(0, TOP - 2, LEFT - 2, 0);
    lastDrawMs = performance.now() - started;
    $("status").textContent = visible + " of " + N + " messages in view" + (aggregated ? " (aggregated per pixel column: zoom in for arrows)" : "") +
      (filterLane >= 0 ? ", server " + lanes[filterLane].label : "") + (filterRound !== null ? ", round 0x" + filterRound.toString(16) : "");
    counts.dataset.visible = String(visible);
    counts.dataset.aggregated = String(aggregated);
    counts.dataset.drawMs = lastDrawMs.toFixed(1);
    const ms = (a, b) => (b - a).toFixed(1);
    counts.dataset.drawParts = "axis " + ms(started, tAxis) + ", elections " + ms(tAxis, tRounds) + ", lanes " + ms(tRounds, tLanes) +
      ", messages " + ms(tLanes, tMsgs) + ", marks " + ms(tMsgs, started + lastDrawMs);
  }
  function paintBand(b, y, h, css, alpha) {
    const a = Math.max(LEFT, X(b.s)), e = Math.min(W, Math.max(X(b.e), X(b.s) + 2));
    if (e < LEFT || a > W) return;
    // Bands narrower than a pixel, inside a pixel already painted, are skipped.
    if (e - a < 1 && Math.floor(a) === paintBand.last && y === paintBand.y) return;
    paintBand.last = Math.floor(a);
    paintBand.y = y;
    ctx.globalAlpha = alpha || 0.55; ctx.fillStyle = css; ctx.fillRect(a, y, Math.max(1, e - a), h); ctx.globalAlpha = 1;
  }
  function drawArrows(i0, i1) {
    // One path per colour and dash style: a few canvas calls however many arrows.
    const paths = new Map();
    const heads = new Map();
    for (let i = i0; i < i1; i++) {
      if (!passes(i)) continue;
      const key = mcol[i] * 2 + mdash[i];
      let p = paths.get(key);
      if (!p) { p = new Path2D(); paths.set(key, p); heads.set(key, new Path2D()); }
      const x = X(mt[i]), y1 = laneY(mfrom[i]), y2 = laneY(mto[i]);
      const dir = y2 >= y1 ? 1 : -1;
      p.moveTo(x, y1); p.lineTo(x + 3, y2 - dir * 2);
      const h = heads.get(key);
      h.moveTo(x + 3, y2); h.lineTo(x, y2 - dir * 6); h.lineTo(x + 6, y2 - dir * 6); h.closePath();
      drawnArrows++;
    }
    ctx.lineWidth = 1.2;
    for (const [key, p] of paths) {
      const c = colours[key >> 1].css;
      ctx.strokeStyle = c; ctx.fillStyle = c;
      ctx.setLineDash(key & 1 ? [3, 2] : []);
      ctx.stroke(p);
      ctx.setLineDash([]);
      ctx.fill(heads.get(key));
    }
    hits.bins = null;
  }
  function drawAggregated(i0, i1) {
    // Per 2-pixel column and sender: how many messages, in the colour of the last of them.
    const px = hits.binPx, nb = Math.ceil((W - LEFT) / px) + 1, nl = lanes.length;
    const n = new Int32Array(nb * nl), col = new Int32Array(nb * nl);
    const scale = (W - LEFT - 10) / (v1 - v0) / px;
    for (let i = i0; i < i1; i++) {
      if ((filterLane >= 0 || filterRound !== null) && !passes(i)) continue;
      const b = Math.floor((mt[i] - v0) * scale);
      if (b < 0 || b >= nb) continue;
      const k = b * nl + mfrom[i];
      n[k]++;
      col[k] = mcol[i];
    }
    const rects = new Map();
    for (let li = 0; li < nl; li++) {
      const y = laneY(li);
      for (let b = 0; b < nb; b++) {
        const c = n[b * nl + li];
        if (!c) continue;
        const h = Math.min(laneH * 0.45, 2 + 3 * Math.log2(1 + c));
        const ci = col[b * nl + li];
        let p = rects.get(ci);
        if (!p) { p = new Path2D(); rects.set(ci, p); }
        p.rect(LEFT + b * px, y - h, px, h * 2);
      }
    }
    for (const [ci, p] of rects) { ctx.fillStyle = colours[ci].css; ctx.fill(p); }
    hits.bins = { n, col, nl };
  }

  // ---- hover and click ----
  function pick(mx, my) {
    for (const dm of decisions) {
      const x = X(dm.d.time), y = laneY(dm.li);
      if (Math.abs(mx - x) + Math.abs(my - y) <= 8) return { decision: dm };
    }
    if (my < TOP) {
      for (const am of anomalies) if (am.t !== null && Math.abs(X(am.t) - mx) <= 6) return { anomaly: am };
    }
    if (aggregated && hits.bins) {
      const b = Math.floor((mx - LEFT) / hits.binPx);
      for (let li = 0; li < lanes.length; li++) {
        if (Math.abs(laneY(li) - my) > laneH / 2) continue;
        const c = hits.bins.n[b * hits.bins.nl + li];
        if (c) return { bin: { n: c, b, li } };
      }
      return null;
    }
    const a = lowerBound(Tof(mx - 8)), z = lowerBound(Tof(mx + 8));
    let best = -1, bd = 6;
    for (let i = a; i < z && i < a + 20000; i++) {
      if (!passes(i)) continue;
      const x = X(mt[i]) + 1.5, y1 = laneY(mfrom[i]), y2 = laneY(mto[i]);
      if (my < Math.min(y1, y2) - 4 || my > Math.max(y1, y2) + 4) continue;
      const d = Math.abs(mx - x);
      if (d < bd) { bd = d; best = i; }
    }
    return best >= 0 ? { msg: best } : null;
  }
  function describe(o) {
    const rel = (t) => (typeof t === "number" ? "  (+" + (t - T0).toFixed(6) + " s)" : "");
    const lines = [];
    const obj = o.msg !== undefined ? msgs[o.msg] : o.decision ? o.decision.d : o.anomaly ? o.anomaly.a : null;
    if (o.bin) {
      const e = o.bin;
      return e.n + " messages from " + lanes[e.li].label + " around +" + (Tof(LEFT + e.b * hits.binPx) - T0).toFixed(3) + " s\n(zoom in to see each one)";
    }
    if (o.decision) {
      const d = o.decision.d, r = rounds[o.decision.ri];
      return "sid " + d.sid + " " + d.state + " (leader " + d.leader + ") at +" + (d.time - T0).toFixed(3) + " s\n" +
        roundName(r, o.decision.ri) + ", round 0x" + Number(d.election_epoch).toString(16) +
        (typeof d.took === "number" ? "; took " + (d.took_at_least ? "at least " : "") + (d.took * 1000).toFixed(0) + " ms" : "") +
        (d.sync ? "; sync " + (d.sync.mode || "(mode not captured)") : "");
    }
    if (o.anomaly) return (o.anomaly.t !== null ? "+" + (o.anomaly.t - T0).toFixed(3) + " s  " : "") + o.anomaly.a.message;
    for (const k of Object.keys(obj)) {
      const v = obj[k];
      lines.push(k + ": " + (typeof v === "object" && v !== null ? JSON.stringify(v) : String(v)) + (k === "time" ? rel(v) : ""));
    }
    return lines.join("\n");
  }
  let drag = null;
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
    if (drag) {
      const dt = ((mx - drag.x) / (W - LEFT - 10)) * (drag.v1 - drag.v0);
      v0 = drag.v0 - dt; v1 = drag.v1 - dt; drag.moved = true;
      draw(); return;
    }
    const p = pick(mx, my);
    if (!p) { tip.hidden = true; return; }
    tip.textContent = describe(p);
    tip.hidden = false;
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    tip.style.left = Math.min(mx + 14, W - tw - 4) + "px";
    tip.style.top = Math.min(my + 14, H - th - 4) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; drag = null; canvas.classList.remove("dragging"); });
  canvas.addEventListener("mousedown", (ev) => {
    const r = canvas.getBoundingClientRect();
    drag = { x: ev.clientX - r.left, v0, v1, moved: false };
    canvas.classList.add("dragging");
  });
  canvas.addEventListener("mouseup", (ev) => {
    const d = drag; drag = null; canvas.classList.remove("dragging");
    if (d && d.moved) return;
    const r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
    if (mx < LEFT) {
      for (let li = 0; li < lanes.length; li++) if (Math.abs(laneY(li) - my) <= laneH / 2) { setFilter(filterLane === li ? -1 : li, filterRound, false); return; }
      return;
    }
    const p = pick(mx, my);
    if (!p) return;
    if (p.msg !== undefined) {
      const m = msgs[p.msg];
      if (ev.shiftKey && m.type === "notification") setFilter(filterLane, m.election_epoch, true);
      else setFilter(mfrom[p.msg], filterRound, false);
    } else if (p.decision) {
      setFilter(p.decision.li, filterRound, false);
    }
  });
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = canvas.getBoundingClientRect();
    zoomAt(Tof(ev.clientX - r.left), Math.pow(1.0015, ev.deltaY));
  }, { passive: false });
  function zoomAt(t, f) { setView(t - (t - v0) * f, t + (v1 - t) * f); }
  $("z-in").onclick = () => zoomAt((v0 + v1) / 2, 0.5);
  $("z-out").onclick = () => zoomAt((v0 + v1) / 2, 2);
  $("z-fit").onclick = fit;
  window.addEventListener("keydown", (ev) => {
    if (ev.target && ev.target.tagName === "SELECT") return;
    const span = v1 - v0;
    if (ev.key === "+" || ev.key === "=") zoomAt((v0 + v1) / 2, 0.5);
    else if (ev.key === "-") zoomAt((v0 + v1) / 2, 2);
    else if (ev.key === "0") fit();
    else if (ev.key === "ArrowLeft") setView(v0 - span * 0.2, v1 - span * 0.2);
    else if (ev.key === "ArrowRight") setView(v0 + span * 0.2, v1 + span * 0.2);
    else if (ev.key === "Escape") { setFilter(-1, null, false); }
  });
  window.addEventListener("resize", () => { resize(); draw(); });

  // ---- the summary beside ----
  function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  const side = $("summary");
  const rel = (t) => "+" + (t - T0).toFixed(3) + " s";
  // What the text summary says of each round (D.round_texts, one block per round), its first
  // line the heading; the page writes no words of its own about the election.
  let listedDecisions = 0;
  const texts = D.round_texts || [];
  rounds.forEach((r, i) => {
    const lines = (texts[i] || "").split("\n").filter((l) => l.length);
    const h = el("h2", lines[0] || roundName(r, i), "click" + (r.kind !== "rejoin" && r.cause ? " cause" : ""));
    h.onclick = () => { const e = roundEnd(i); setView(r.started - (e - r.started) * 0.05 - 0.01, e + 0.05); };
    side.appendChild(h);
    const ul = el("ul");
    for (const line of lines.slice(1)) {
      const m = /^\s*\+?(-?[0-9.]+)s\s+sid (\S+) (LOOKING|FOLLOWING|LEADING|OBSERVING) /.exec(line);
      const d = m && (r.decisions || []).find((x) => String(x.sid) === m[2] && x.state === m[3] && Math.abs(x.time - T0 - Number(m[1])) < 0.0015);
      const li = el("li", line.trim(), d ? "click" : /still LOOKING/.test(line) ? "still" : undefined);
      if (d) {
        li.onclick = () => { const w = Math.max((v1 - v0) / 8, 0.05); setView(d.time - w, d.time + w); };
        listedDecisions++;
      }
      ul.appendChild(li);
    }
    side.appendChild(ul);
  });
  side.appendChild(el("h2", "Anomalies (" + anomalies.length + ")"));
  const aul = el("ul");
  for (const am of anomalies) {
    const li = el("li", (am.t !== null ? rel(am.t) + "  " : "") + am.a.message, "anomaly" + (am.t !== null ? " click" : ""));
    if (am.t !== null) li.onclick = () => { const w = Math.max((v1 - v0) / 8, 0.05); setView(am.t - w, am.t + w); };
    aul.appendChild(li);
  }
  side.appendChild(aul);
  if (decodeErrors.length) {
    side.appendChild(el("h2", "Decode errors (" + decodeErrors.length + ")"));
    const eul = el("ul");
    for (const p of decodeErrors.slice(0, 200)) eul.appendChild(el("li", (num(p.time) !== null ? rel(p.time) + "  " : "") + p.what));
    side.appendChild(eul);
  }
  const legend = $("legend");
  legend.appendChild(el("b", "States "));
  for (const [k, c] of Object.entries(stateCss)) { const s = el("span", "", "sw"); s.style.background = c; legend.appendChild(s); legend.appendChild(document.createTextNode(k)); }
  legend.appendChild(el("br"));
  legend.appendChild(el("b", "Votes for "));
  for (const c of colours.slice(0, 24)) { const s = el("span", "", "sw"); s.style.background = c.css; legend.appendChild(s); legend.appendChild(document.createTextNode(c.key.replace("leader ", "sid ").replace(/sid -\d{15,}/, "none"))); }

  resize();
  fit();
  counts.dataset.arrows = String(N);
  counts.dataset.lanes = String(lanes.length);
  counts.dataset.decisions = String(decisions.length);
  counts.dataset.listedDecisions = String(listedDecisions);
  counts.dataset.anomalies = String(anomalies.length);
  counts.dataset.rounds = String(rounds.length);
  counts.dataset.phases = String(extra.reduce((n, l) => n + l.length, 0));
  counts.dataset.causes = String(side.querySelectorAll(".cause").length);
  counts.dataset.drawnArrows = String(drawnArrows);
  // `election.html#selftest`: the page exercises its own filters and hover and records what
  // it saw in the counts element, for tests in a headless browser (no input events there).
  if (location.hash === "#selftest") {
    const perLane = [];
    for (const li of order) {
      setFilter(li, null, false);
      perLane.push(lanes[li].label + "=" + counts.dataset.visible);
    }
    counts.dataset.selftestLanes = perLane.join(";");
    const perRound = [];
    for (const e of epochs) {
      setFilter(-1, e, false);
      fit();
      perRound.push(e + "=" + counts.dataset.visible);
    }
    counts.dataset.selftestRounds = perRound.join(";");
    setFilter(-1, null, false);
    fit();
    // Hover the first notification's arrow, halfway between its lanes; zoom in on it first.
    const i = msgs.findIndex((r) => r.type === "notification");
    if (i >= 0) {
      setView(mt[i] - 1e-4, mt[i] + 1e-4);
      const p = pick(X(mt[i]) + 1.5, (laneY(mfrom[i]) + laneY(mto[i])) / 2);
      const text = p && p.msg !== undefined ? describe(p) : "";
      counts.dataset.selftestHover = Object.keys(msgs[i]).every((k) => text.includes(k + ": ")) ? "every field" : "missing: " + text;
      fit();
    }
  }
  if (drawlog) {
    const pre = el("pre");
    pre.id = "zkfle-drawlog";
    pre.hidden = true;
    pre.textContent = JSON.stringify({ view: { LEFT, TOP, BOTTOM, W, H, v0, v1, laneH, lanes: lanes.length }, calls: drawlog });
    document.body.appendChild(pre);
  }
  counts.dataset.ready = "true";
})();
