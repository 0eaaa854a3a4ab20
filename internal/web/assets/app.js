// sqm's page: plain DOM code, no framework. Everything comes from the JSON
// API; text goes in with textContent, never innerHTML, so nothing from the
// router (interface names, error messages) can become markup.
'use strict';

const $ = (id) => document.getElementById(id);
let csrf = '';
let role = '';
const HISTORY = 120; // samples kept per device for the graphs (2 min at 1 s)
const history = {};   // device -> [{t, rx, tx, tins: [avg delay ms]}]
const arHistory = {}; // device -> [{t, down: {rate, delay}, up: {rate, delay}}] (autorate)
let lastSample = {};  // device -> {t, bytes}
let statusTimer = null;
let testTimer = null;
let tuneTimer = null;
let config = null;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else if (v !== false && v != null) e.setAttribute(k, v);
  }
  for (const c of kids) if (c != null) e.append(c);
  return e;
}

async function api(method, path, body) {
  const opt = { method, headers: {}, credentials: 'same-origin' };
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.headers['X-CSRF-Token'] = csrf;
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (r.status === 401 && path !== '/api/login') { showLogin(); }
  return { status: r.status, ok: r.ok, data: data || {} };
}

// ---- login ----------------------------------------------------------------

function showLogin() {
  stopTimers();
  // Nothing of the last session stays in the page: the next login may be
  // a read-only one, and must not see forms built for an admin.
  $('queues').textContent = ''; $('forms').textContent = '';
  $('t-result').hidden = true; $('t-progress').hidden = true;
  $('u-result').hidden = true; $('u-progress').hidden = true; $('u-tables').textContent = '';
  config = null;
  $('app').hidden = true; $('nav').hidden = true; $('logout').hidden = true;
  $('who').textContent = '';
  $('login').hidden = false;
  $('password').focus();
}

function showApp(s) {
  csrf = s.csrf; role = s.role;
  $('login').hidden = true;
  $('app').hidden = false; $('nav').hidden = false; $('logout').hidden = false;
  $('who').textContent = role === 'admin' ? 'admin' : 'read-only';
  $('ro-note').hidden = role === 'admin';
  $('t-start').disabled = role !== 'admin';
  loadStatus();
  loadConfig();
  loadTest();
  loadTune();
  statusTimer = setInterval(() => { if (!document.hidden) loadStatus(); }, 1000);
}

function stopTimers() {
  clearInterval(statusTimer); statusTimer = null;
  clearTimeout(testTimer); testTimer = null;
  clearTimeout(tuneTimer); tuneTimer = null;
}

$('login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('login-err').textContent = '';
  const r = await api('POST', '/api/login', { password: $('password').value }).catch(() => null);
  // The login itself carries no CSRF token yet: api() sends an empty one.
  if (!r || !r.ok) { $('login-err').textContent = (r && r.data.error) || 'login failed'; return; }
  $('password').value = '';
  showApp(r.data);
});

$('logout').addEventListener('click', async () => {
  await api('POST', '/api/logout', {});
  csrf = '';
  showLogin();
});

// ---- formatting -------------------------------------------------------------

function fmtRate(bps) {
  if (bps >= 1e9) return (bps / 1e9).toFixed(2) + ' Gbit/s';
  if (bps >= 1e6) return (bps / 1e6).toFixed(bps >= 1e8 ? 0 : 1) + ' Mbit/s';
  if (bps >= 1e3) return (bps / 1e3).toFixed(0) + ' kbit/s';
  return bps.toFixed(0) + ' bit/s';
}
function fmtKbit(k) { return k ? fmtRate(k * 1000) : 'off'; }
function fmtBytes(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(2) + ' GB';
  if (n >= 1e6) return (n / 1e6).toFixed(1) + ' MB';
  if (n >= 1e3) return (n / 1e3).toFixed(1) + ' kB';
  return n + ' B';
}
function fmtUs(us) { return us >= 1000 ? (us / 1000).toFixed(1) + ' ms' : us + ' µs'; }
function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return Math.round(s) + ' s ago';
  if (s < 5400) return Math.round(s / 60) + ' min ago';
  if (s < 172800) return Math.round(s / 3600) + ' h ago';
  return Math.round(s / 86400) + ' days ago';
}
function tinNames(n) {
  if (n === 1) return ['Best effort'];
  if (n === 3) return ['Bulk', 'Best effort', 'Voice'];
  if (n === 4) return ['Bulk', 'Best effort', 'Video', 'Voice'];
  return Array.from({ length: n }, (_, i) => 'Tin ' + i);
}

// ---- status -----------------------------------------------------------------

async function loadStatus() {
  const r = await api('GET', '/api/status').catch((e) => ({ ok: false, data: { error: String(e) } }));
  if (!r.ok) { if (r.status !== 401) $('status-err').textContent = r.data.error || 'status unavailable'; return; }
  $('status-err').textContent = '';
  $('updated').textContent = 'updated ' + new Date(r.data.time).toLocaleTimeString();
  renderStatus(r.data.status, Date.parse(r.data.time) / 1000);
}

// rootQdisc is the qdisc at the device's root: its counters are the
// direction's totals.
function rootQdisc(k) {
  if (!k || !k.qdiscs) return null;
  return k.qdiscs.find((q) => q.parent === 'root') || null;
}

function sample(dev, k, t) {
  const q = rootQdisc(k);
  if (!q) return null;
  const prev = lastSample[dev];
  lastSample[dev] = { t, bytes: q.bytes, drops: q.drops };
  const h = history[dev] || (history[dev] = []);
  if (!prev || t <= prev.t) return null;
  const dt = t - prev.t;
  const s = { t, bps: Math.max(0, (q.bytes - prev.bytes) * 8 / dt), drops: Math.max(0, q.drops - prev.drops) / dt, backlog: q.backlog_bytes };
  if (q.cake) s.tins = q.cake.tins.map((x) => x.avg_delay_us / 1000);
  h.push(s);
  if (h.length > HISTORY) h.shift();
  return s;
}

function renderStatus(st, t) {
  const box = $('queues');
  const open = new Set([...box.querySelectorAll('details[open]')].map((d) => d.dataset.key));
  box.textContent = '';
  const devs = st.devices || [];
  const ifbOf = {};
  for (const d of devs) if (d.ifb_of) ifbOf[d.ifb_of] = d;
  const shown = new Set();
  for (const d of devs) {
    if (d.ifb_of) continue;
    shown.add(d.device);
    box.append(queueCard(d, ifbOf[d.device], st, t, open));
  }
  for (const [iface, what] of Object.entries(st.last || {})) {
    if (shown.has(iface)) continue;
    box.append(el('div', { class: 'card' },
      el('div', { class: 'queue-head' }, el('h3', { text: iface }),
        el('span', { class: 'pill warn', text: 'not shaped' })),
      el('p', { class: 'facts', text: what })));
  }
  if (!box.childElementCount) box.append(el('p', { class: 'muted', text: 'sqm shapes no interface. Enable a queue under Settings.' }));
  if (st.last_error) box.append(el('p', { class: 'err', text: 'Last daemon error: ' + st.last_error }));
  for (const r of st.refused || []) box.append(el('p', { class: 'err', 'data-refused': r.section, text: 'Section "' + r.section + '" (' + (r.section_pos || r.source) + ') is refused, not started (its interface keeps what it had): ' + (r.errors || []).join('; ') }));
}

function queueCard(d, ifb, st, t, open) {
  const sh = d.shaping;
  const link = (st.links || {})[d.device] || {};
  const problems = [];
  if (!sh) problems.push('sqm does not shape this interface');
  if (!link.exists) problems.push('interface does not exist');
  else if (!link.up) problems.push('interface is down');
  else if (!link.running) problems.push('interface has no carrier');
  if (sh && d.tree_matches === false) problems.push('kernel tree differs from what sqm applied: ' + (d.drift || ''));
  if (d.error) problems.push(d.error);
  const last = (st.last || {})[d.device] || '';
  if (/failed|error|refused/i.test(last)) problems.push('last action: ' + last);
  const ok = problems.length === 0;

  const card = el('div', { class: 'card queue', 'data-device': d.device });
  card.append(el('div', { class: 'queue-head' },
    el('h3', { text: d.device }),
    el('span', { class: 'pill ' + (ok ? 'ok' : 'bad'), 'data-state': ok ? 'working' : 'problem', text: ok ? 'Shaping is working' : 'Not working' })));
  if (sh) {
    const o = sh.options;
    card.append(el('p', { class: 'facts', text:
      `section ${sh.section} · ${o.script}/${o.qdisc} · ↓ ${fmtKbit(o.download)} ↑ ${fmtKbit(o.upload)}` +
      (o.linklayer !== 'none' ? ` · ${o.linklayer} overhead ${o.overhead}` : '') +
      ` · applied ${ago(sh.applied_at)}` }));
  }
  if (!ok) card.append(el('ul', { class: 'problems' }, ...problems.map((p) => el('li', { text: p }))));
  else if (last) card.append(el('p', { class: 'facts', text: 'last action: ' + last }));

  const up = sample(d.device, d.kernel, t);
  const down = ifb ? sample(ifb.device, ifb.kernel, t) : null;
  const live = el('div', { class: 'live' });
  const stat = (v, label, key) => el('div', { class: 'stat' }, el('b', { text: v, 'data-live': key }), el('span', { text: label }));
  const upq = rootQdisc(d.kernel), dnq = ifb ? rootQdisc(ifb.kernel) : null;
  if (dnq) live.append(stat(down ? fmtRate(down.bps) : '…', 'download now', 'down'));
  if (upq) live.append(stat(up ? fmtRate(up.bps) : '…', 'upload now', 'up'));
  const drops = (upq ? upq.drops : 0) + (dnq ? dnq.drops : 0);
  const marks = (upq ? upq.ecn_marks : 0) + (dnq ? dnq.ecn_marks : 0);
  const backlog = (upq ? upq.backlog_bytes : 0) + (dnq ? dnq.backlog_bytes : 0);
  const packets = (upq ? upq.packets : 0) + (dnq ? dnq.packets : 0);
  live.append(stat(String(packets), 'packets', 'packets'), stat(String(drops), 'drops', 'drops'),
    stat(String(marks), 'ECN marks', 'marks'), stat(fmtBytes(backlog), 'backlog', 'backlog'));
  card.append(live);

  card.append(rateGraph(history[ifb ? ifb.device : ''] || [], history[d.device] || []));
  card.append(el('div', { class: 'legend' }, el('i', { class: 'l-down' }), 'download', el('i', { class: 'l-up' }), 'upload', ' · last 2 minutes'));
  const lg = card.lastChild.children;
  lg[0].style.background = 'var(--down)'; lg[1].style.background = 'var(--up)';

  if (d.autorate) card.append(autorateSection(d.device, d.autorate, t));

  for (const [dev, label] of [[ifb, 'download (ingress, on ' + (ifb ? ifb.device : '') + ')'], [d, 'upload (egress)']]) {
    if (!dev || !dev.kernel) continue;
    const q = rootQdisc(dev.kernel);
    if (q && q.cake) {
      card.append(el('h4', { text: 'cake tins, ' + label }));
      card.append(tinGraph(history[dev.device] || [], q.cake.tins.length));
      card.append(tinTable(q.cake));
    }
  }
  const det = el('details', { 'data-key': d.device }, el('summary', { text: 'All counters' }));
  if (open.has(d.device)) det.open = true;
  for (const dev of [d, ifb]) if (dev && dev.kernel) det.append(el('div', { class: 'mono', text: dev.device }), countersTable(dev.kernel));
  card.append(det);
  return card;
}

// autorateSection shows what the daemon's autorate does to the queue: each
// direction's rate, delay and last reason now, and the rate and the delay
// it acted on over the last minutes (kept here from each status poll, like
// the throughput graph).
function autorateSection(dev, ar, t) {
  const dirs = [['download', ar.download], ['upload', ar.upload]].filter(([, x]) => x);
  const h = arHistory[dev] || (arHistory[dev] = []);
  if (!h.length || t > h[h.length - 1].t) {
    const s = { t };
    for (const [name, x] of dirs) s[name] = { rate: x.rate_kbit * 1000, delay: x.delay_ms, target: x.target_ms };
    h.push(s);
    if (h.length > HISTORY) h.shift();
  }
  const out = el('div', { 'data-autorate-section': dev }, el('h4', { text: 'Autorate' }));
  let state = 'following the link';
  if (ar.error) state = ar.error;
  else if (ar.fallback) state = 'at the base rates: no reflector answers';
  else if (!ar.running) state = 'starting';
  out.append(el('p', { class: 'facts', 'data-autorate-state': ar.error || ar.fallback ? 'base' : 'running', text:
    state + ` · ${ar.rate_changes || 0} rate changes · ${(ar.reflectors || []).filter((r) => r.replied).length} of ${(ar.reflectors || []).length} reflectors answering` }));
  const live = el('div', { class: 'live' });
  for (const [name, x] of dirs) {
    const delay = x.delay_ms < 0 ? 'no delay yet' : `${x.delay_ms.toFixed(1)} ms of ${x.target_ms} ms target`;
    live.append(el('div', { class: 'stat' }, el('b', { text: fmtKbit(x.rate_kbit), 'data-autorate': name }),
      el('span', { text: `${name} rate (${fmtKbit(x.min_kbit)}–${fmtKbit(x.max_kbit)}) · ${delay} · ${x.reason}` })));
  }
  out.append(live);
  const series = (name, key) => h.filter((s) => s[name] && s[name][key] >= 0).map((s) => ({ t: s.t, v: s[name][key] }));
  out.append(lineGraph([series('download', 'rate'), series('upload', 'rate')], ['#2f5fd0', '#d9730d'], (v) => fmtRate(v) + ' rate set'));
  out.append(lineGraph([series('download', 'delay'), series('upload', 'delay'), series(dirs.length ? dirs[0][0] : 'download', 'target')], ['#2f5fd0', '#d9730d', '#8a94a8'], (v) => v.toFixed(1) + ' ms delay rise'));
  const lg = el('div', { class: 'legend' }, el('i'), 'download', el('i'), 'upload', el('i'), 'target', ' · rate set, and the delay rise it acted on, last 2 minutes');
  ['var(--down)', 'var(--up)', '#8a94a8'].forEach((c, i) => { lg.children[i].style.background = c; });
  out.append(lg);
  return out;
}

function countersTable(k) {
  const rows = [];
  for (const q of k.qdiscs || []) rows.push(['qdisc ' + q.kind + ' ' + q.handle, q]);
  for (const c of k.classes || []) rows.push(['class ' + c.kind + ' ' + c.classid, c]);
  const head = ['', 'bytes', 'packets', 'drops', 'overlimits', 'backlog', 'ECN marks'];
  return el('div', { class: 'scroll' }, el('table', {},
    el('thead', {}, el('tr', {}, ...head.map((h) => el('th', { text: h })))),
    el('tbody', {}, ...rows.map(([name, c]) => el('tr', {},
      el('td', { text: name }), el('td', { text: fmtBytes(c.bytes) }), el('td', { text: String(c.packets) }),
      el('td', { text: String(c.drops) }), el('td', { text: String(c.overlimits) }),
      el('td', { text: fmtBytes(c.backlog_bytes) + ' / ' + c.backlog_packets + 'p' }), el('td', { text: String(c.ecn_marks) }))))));
}

function tinTable(cake) {
  const names = tinNames(cake.tins.length);
  const rows = [
    ['threshold', (t) => fmtRate(t.threshold_rate * 8)],
    ['target', (t) => fmtUs(t.target_us)],
    ['peak delay', (t) => fmtUs(t.peak_delay_us)],
    ['avg delay', (t) => fmtUs(t.avg_delay_us)],
    ['base delay', (t) => fmtUs(t.base_delay_us)],
    ['packets', (t) => String(t.sent_packets)],
    ['bytes', (t) => fmtBytes(t.sent_bytes)],
    ['drops', (t) => String(t.dropped_packets)],
    ['ECN marks', (t) => String(t.ecn_marks)],
    ['ack drops', (t) => String(t.ack_drops)],
    ['backlog', (t) => fmtBytes(t.backlog_bytes)],
    ['sparse flows', (t) => String(t.sparse_flows)],
    ['bulk flows', (t) => String(t.bulk_flows)],
    ['unresponsive', (t) => String(t.unresponsive_flows)],
  ];
  return el('div', { class: 'scroll' }, el('table', { class: 'tins' },
    el('thead', {}, el('tr', {}, el('th'), ...names.map((n) => el('th', { text: n })))),
    el('tbody', {}, ...rows.map(([label, f]) => el('tr', {}, el('td', { text: label }), ...cake.tins.map((t) => el('td', { text: f(t) })))))));
}

const SVGNS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// lineGraph draws series (arrays of {t, v}) over the last HISTORY seconds;
// the y scale starts at 0. The SVG stretches to the card's width, so its
// labels are HTML laid over it rather than SVG text, which would stretch.
function lineGraph(series, colors, fmt) {
  const W = 600, H = 120, P = 4;
  const wrap = el('div', { class: 'graph-wrap' });
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', class: 'graph', role: 'img' });
  wrap.append(g);
  let tmax = 0, vmax = 0;
  for (const s of series) for (const p of s) { tmax = Math.max(tmax, p.t); vmax = Math.max(vmax, p.v); }
  if (!tmax) {
    wrap.append(el('span', { class: 'graph-note', text: 'collecting…' }));
    return wrap;
  }
  wrap.append(el('span', { class: 'graph-max', text: fmt(vmax) }));
  vmax = vmax > 0 ? vmax * 1.1 : 1;
  const x = (t) => W - P - (tmax - t) / HISTORY * (W - 2 * P);
  const y = (v) => H - P - v / vmax * (H - 2 * P);
  for (const f of [0.25, 0.5, 0.75]) g.append(svg('line', { x1: 0, x2: W, y1: y(vmax * f), y2: y(vmax * f), stroke: '#eceff3', 'vector-effect': 'non-scaling-stroke' }));
  series.forEach((s, i) => {
    if (s.length < 2) return;
    g.append(svg('polyline', { points: s.map((p) => x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1)).join(' '), fill: 'none', stroke: colors[i % colors.length], 'stroke-width': 2, 'vector-effect': 'non-scaling-stroke' }));
  });
  return wrap;
}

function rateGraph(down, up) {
  return lineGraph([down.map((s) => ({ t: s.t, v: s.bps })), up.map((s) => ({ t: s.t, v: s.bps }))],
    ['#2f5fd0', '#d9730d'], fmtRate);
}

const TIN_COLORS = ['#8a94a8', '#2f5fd0', '#12805c', '#d9730d', '#b42318', '#7a3fd0', '#0b8fa3', '#a15c07'];
function tinGraph(h, n) {
  const series = [];
  for (let i = 0; i < n; i++) series.push(h.filter((s) => s.tins).map((s) => ({ t: s.t, v: s.tins[i] || 0 })));
  const wrap = el('div');
  // A cake on an idle or fast link delays by microseconds: in ms the
  // scale would read 0.0.
  wrap.append(lineGraph(series, TIN_COLORS, (v) => fmtUs(Math.round(v * 1000)) + ' avg delay'));
  const lg = el('div', { class: 'legend' });
  tinNames(n).forEach((name, i) => { const sw = el('i'); sw.style.background = TIN_COLORS[i % TIN_COLORS.length]; lg.append(sw, name); });
  lg.append(' · average delay per tin');
  wrap.append(lg);
  return wrap;
}

// ---- settings -----------------------------------------------------------------

// Link presets set linklayer, overhead and tcMPU together (cake's keywords
// and sqm-scripts' advice; VLAN adds 4 bytes).
const PRESETS = [
  ['', 'Choose a link type…'],
  ['none', 'No compensation', { linklayer: 'none', overhead: '', tcMPU: '' }],
  ['docsis', 'Cable (DOCSIS)', { linklayer: 'ethernet', overhead: '18', tcMPU: '64' }],
  ['vdsl', 'VDSL2 (PTM), bridged', { linklayer: 'ethernet', overhead: '22', tcMPU: '' }],
  ['vdsl-pppoe', 'VDSL2 (PTM) with PPPoE', { linklayer: 'ethernet', overhead: '30', tcMPU: '' }],
  ['vdsl-pppoe-vlan', 'VDSL2 (PTM) with PPPoE and VLAN', { linklayer: 'ethernet', overhead: '34', tcMPU: '' }],
  ['adsl-pppoe', 'ADSL (ATM) with PPPoE, LLC', { linklayer: 'atm', overhead: '40', tcMPU: '' }],
  ['adsl-pppoa', 'ADSL (ATM) with PPPoA, VC-mux', { linklayer: 'atm', overhead: '10', tcMPU: '' }],
  ['adsl-unsure', 'ADSL (ATM), framing unknown', { linklayer: 'atm', overhead: '48', tcMPU: '' }],
  ['ethernet', 'Ethernet / fibre (full frame)', { linklayer: 'ethernet', overhead: '38', tcMPU: '84' }],
];

// Fields in LuCI's order. [option, label, kind, default, extra]
const BASIC = [
  ['enabled', 'Enable this queue', 'check', '0'],
  ['interface', 'Interface', 'text', ''],
  ['download', 'Download (kbit/s, 0 = not shaped)', 'text', '0'],
  ['upload', 'Upload (kbit/s, 0 = not shaped)', 'text', '0'],
  ['debug_logging', 'Debug log', 'check', '0'],
  ['verbosity', 'Log verbosity', 'select', '5', [['0', 'silent'], ['1', 'error'], ['2', 'warning'], ['5', 'info'], ['8', 'debug'], ['10', 'trace']]],
];
const QDISC_ADV = [
  ['squash_dscp', 'Squash DSCP on inbound packets', 'check', '1'],
  ['squash_ingress', 'Ignore DSCP on ingress', 'check', '1'],
  ['ingress_ecn', 'ECN on ingress', 'select', 'ECN', [['ECN', 'ECN'], ['NOECN', 'no ECN']]],
  ['egress_ecn', 'ECN on egress', 'select', 'NOECN', [['ECN', 'ECN'], ['NOECN', 'no ECN']]],
];
const QDISC_RRA = [
  ['ilimit', 'Hard limit, ingress (packets)', 'text', ''],
  ['elimit', 'Hard limit, egress (packets)', 'text', ''],
  ['itarget', 'Latency target, ingress (auto, default, 5ms)', 'text', ''],
  ['etarget', 'Latency target, egress', 'text', ''],
  ['iqdisc_opts', 'Extra qdisc options, ingress', 'text', ''],
  ['eqdisc_opts', 'Extra qdisc options, egress', 'text', ''],
];
// sqm's own autorate options (the daemon follows a link whose capacity
// moves); download/upload above stay the base rates.
const AUTORATE = [
  ['autorate_download_min', 'Download minimum (kbit/s; default download/4)', 'text', ''],
  ['autorate_download_max', 'Download maximum (kbit/s; default download×2)', 'text', ''],
  ['autorate_upload_min', 'Upload minimum (kbit/s; default upload/4)', 'text', ''],
  ['autorate_upload_max', 'Upload maximum (kbit/s; default upload×2)', 'text', ''],
  ['autorate_target', 'Delay target (ms of one-way delay rise; default 15)', 'text', ''],
  ['autorate_probe', 'Probes', 'select', 'both', [['both', 'ICMP and UDP'], ['icmp', 'ICMP'], ['udp', 'UDP']]],
  ['autorate_reflector', 'Reflectors (space-separated; default: the sqm/irtt server, else a built-in list)', 'text', ''],
];
const LL_ADV = [
  ['tcMTU', 'Max packet size (tcMTU)', 'text', '2047'],
  ['tcTSIZE', 'Rate table size (tcTSIZE)', 'text', '128'],
  ['tcMPU', 'Minimum packet unit (tcMPU)', 'text', '0'],
  ['linklayer_adaptation_mechanism', 'Mechanism', 'select', 'default', [['default', 'default'], ['cake', 'cake'], ['htb_private', 'htb_private'], ['tc_stab', 'tc_stab']]],
];

// Cake keywords the structured controls own inside iqdisc_opts/eqdisc_opts;
// other words the user typed there are kept.
const DIFFSERV = ['besteffort', 'diffserv3', 'diffserv4', 'diffserv8', 'precedence'];
const ISOLATION = ['nat', 'nonat', 'dual-srchost', 'dual-dsthost', 'triple-isolate', 'srchost', 'dsthost', 'hosts', 'flows', 'flowblind'];
const ACK = ['ack-filter', 'ack-filter-aggressive', 'no-ack-filter'];

function words(s) { return (s || '').split(/\s+/).filter(Boolean); }

async function loadConfig() {
  const r = await api('GET', '/api/config');
  if (!r.ok) { $('cfg-err').textContent = r.data.error || 'cannot read the config'; return; }
  config = r.data;
  $('cfg-path').textContent = config.path;
  $('cfg-err').textContent = config.error ? 'The file has errors: ' + config.error : '';
  const warn = $('cfg-warn');
  warn.textContent = '';
  for (const w of config.warnings || []) warn.append(el('li', { text: w }));
  const box = $('forms');
  box.textContent = '';
  for (const sec of config.sections) box.append(sectionForm(sec));
  tuneSections();
  if (!config.sections.length) box.append(el('p', { class: 'muted', text: 'No queue sections in the file.' }));
  if (role === 'admin') box.append(addForm());
}

// addForm adds a disabled queue section for the user to fill in.
function addForm() {
  const name = el('input', { id: 'add-name', placeholder: 'e.g. lte', autocomplete: 'off' });
  const err = el('p', { class: 'err', id: 'add-err' });
  const f = el('form', { class: 'card', id: 'add-form' },
    el('div', { class: 'row' }, el('div', {}, el('label', { for: 'add-name', text: 'New queue section (name)' }), name)),
    err, el('div', { class: 'actions' }, el('button', { type: 'submit', text: 'Add queue' })));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    const r = await api('POST', '/api/config', { add: name.value.trim() });
    if (!r.ok) { err.textContent = (r.data.errors || [{ message: r.data.error }]).map((e) => e.message).join('\n'); return; }
    await loadConfig();
  });
  return f;
}

// removeSection asks for a second click instead of a confirm() dialog.
async function removeSection(btn, sec, form) {
  if (btn.dataset.armed !== '1') {
    btn.dataset.armed = '1';
    btn.textContent = 'Really remove ' + (sec.name || sec.ref) + '?';
    return;
  }
  const r = await api('POST', '/api/config', { section: sec.ref, delete: true });
  if (!r.ok) {
    form.querySelector('[data-form-err]').textContent = (r.data.errors || [{ message: r.data.error }]).map((e) => e.message).join('\n');
    return;
  }
  await loadConfig();
  loadStatus();
}

function field(sec, [opt, label, kind, def, extra]) {
  const cur = sec.options[opt];
  const id = 'f-' + sec.ref.replace(/[^A-Za-z0-9]/g, '_') + '-' + opt;
  let input;
  if (kind === 'check') {
    input = el('input', { type: 'checkbox', id, 'data-opt': opt, 'data-def': def });
    input.checked = (cur === undefined ? def : cur) === '1';
    return el('div', { class: 'f' }, el('label', { class: 'check' }, input, label), el('div', { class: 'field-err', 'data-err': opt }));
  }
  if (kind === 'select') {
    input = el('select', { id, 'data-opt': opt, 'data-def': def });
    const opts = extra.slice();
    if (cur !== undefined && !opts.some((o) => o[0] === cur)) opts.push([cur, cur]);
    for (const [v, t] of opts) input.append(el('option', { value: v, text: t }));
    input.value = cur === undefined ? def : cur;
  } else {
    input = el('input', { id, 'data-opt': opt, 'data-def': def, autocomplete: 'off', placeholder: def });
    if (opt === 'download' || opt === 'upload' || opt === 'overhead' || /limit|tc[A-Z]|_min$|_max$/.test(opt)) input.setAttribute('inputmode', 'numeric');
    input.value = cur === undefined ? '' : cur;
  }
  return el('div', { class: 'f' }, el('label', { for: id, text: label }), input, el('div', { class: 'field-err', 'data-err': opt }));
}

function toggled(form, sec, opt, label, body) {
  const f = field(sec, [opt, label, 'check', '0']);
  const box = el('div', { class: 'row' }, ...body);
  const cb = f.querySelector('input');
  const sync = () => { box.hidden = !cb.checked; };
  cb.addEventListener('change', sync); sync();
  return [f, box];
}

function sectionForm(sec) {
  const form = el('form', { class: 'card', 'data-section': sec.ref, novalidate: true });
  form.append(el('h3', { text: (sec.name ? 'queue ' + sec.name : sec.ref) + '  (line ' + sec.line + ')' }));
  const basic = el('fieldset', {}, el('legend', { text: 'Basic' }), el('div', { class: 'row' }, ...BASIC.map((f) => field(sec, f))));
  const dlID = 'ifaces-' + sec.ref.replace(/[^A-Za-z0-9]/g, '_');
  basic.append(el('datalist', { id: dlID }, ...(config.interfaces || []).map((i) => el('option', { value: i }))));
  basic.querySelector('[data-opt=interface]').setAttribute('list', dlID);

  const qd = config.qdiscs && config.qdiscs.length ? config.qdiscs : ['cake', 'fq_codel'];
  const qdiscF = field(sec, ['qdisc', 'Queue discipline', 'select', 'fq_codel', qd.map((q) => [q, q])]);
  const scriptF = field(sec, ['script', 'Queue setup script', 'select', 'simple.qos', config.scripts.map((s) => [s, s])]);
  const [advF, advBox] = toggled(form, sec, 'qdisc_advanced', 'Show advanced queue options', QDISC_ADV.map((f) => field(sec, f)));
  const [rraF, rraBox] = toggled(form, sec, 'qdisc_really_really_advanced', 'Show dangerous options', QDISC_RRA.map((f) => field(sec, f)));
  const qfs = el('fieldset', {}, el('legend', { text: 'Queue discipline' }), el('div', { class: 'row' }, qdiscF, scriptF), advF, advBox, rraF, rraBox);

  // Cake extras, stored as words in eqdisc_opts/iqdisc_opts.
  const ew = words(sec.options.eqdisc_opts), iw = words(sec.options.iqdisc_opts);
  const pick = (ws, set) => ws.find((w) => set.includes(w)) || '';
  const ds = el('select', { 'data-cake': 'diffserv' }, ...[['', 'recipe default'], ['besteffort', 'best effort (one tin)'], ['diffserv3', 'diffserv3'], ['diffserv4', 'diffserv4'], ['diffserv8', 'diffserv8']].map(([v, t]) => el('option', { value: v, text: t })));
  ds.value = pick(ew, DIFFSERV) || pick(iw, DIFFSERV);
  const hostFair = ew.includes('dual-srchost') || iw.includes('dual-dsthost');
  const nat = ew.includes('nat') || iw.includes('nat');
  const iso = el('select', { 'data-cake': 'isolation' }, ...[['', 'per flow (default)'], ['dual', 'per host (dual-srchost / dual-dsthost)'], ['dual-nat', 'per host behind NAT (nat + dual)']].map(([v, t]) => el('option', { value: v, text: t })));
  iso.value = hostFair ? (nat ? 'dual-nat' : 'dual') : '';
  const ack = el('select', { 'data-cake': 'ack' }, ...[['', 'off'], ['ack-filter', 'ack-filter'], ['ack-filter-aggressive', 'aggressive']].map(([v, t]) => el('option', { value: v, text: t })));
  ack.value = pick(ew, ACK) === 'no-ack-filter' ? '' : pick(ew, ACK);
  const cakeFs = el('fieldset', { 'data-cake-box': '' }, el('legend', { text: 'cake' }), el('div', { class: 'row' },
    el('div', {}, el('label', { text: 'Priority tiers (diffserv)' }), ds),
    el('div', {}, el('label', { text: 'Fairness' }), iso),
    el('div', {}, el('label', { text: 'ACK filter (upload)' }), ack)),
  el('p', { class: 'hint', text: 'Written into eqdisc_opts/iqdisc_opts; other words there are kept.' }));
  const qsel = qdiscF.querySelector('select');
  const cakeSync = () => { cakeFs.hidden = qsel.value !== 'cake'; };
  qsel.addEventListener('change', cakeSync); cakeSync();

  const preset = el('select', { 'data-preset': '' }, ...PRESETS.map(([v, t]) => el('option', { value: v, text: t })));
  const llF = field(sec, ['linklayer', 'Link layer', 'select', 'none', [['none', 'none'], ['ethernet', 'ethernet'], ['atm', 'ATM (ADSL)']]]);
  const ohF = field(sec, ['overhead', 'Per-packet overhead (bytes)', 'text', '0']);
  const [llaF, llaBox] = toggled(form, sec, 'linklayer_advanced', 'Show advanced link layer options', LL_ADV.map((f) => field(sec, f)));
  preset.addEventListener('change', () => {
    const p = PRESETS.find((x) => x[0] === preset.value);
    if (!p || !p[2]) return;
    form.querySelector('[data-opt=linklayer]').value = p[2].linklayer;
    form.querySelector('[data-opt=overhead]').value = p[2].overhead;
    if (p[2].tcMPU) {
      const la = form.querySelector('[data-opt=linklayer_advanced]');
      la.checked = true; la.dispatchEvent(new Event('change'));
    }
    form.querySelector('[data-opt=tcMPU]').value = p[2].tcMPU;
  });
  const llFs = el('fieldset', {}, el('legend', { text: 'Link layer' }),
    el('div', { class: 'row' }, el('div', {}, el('label', { text: 'Preset' }), preset), llF, ohF), llaF, llaBox);

  const [arF, arBox] = toggled(form, sec, 'autorate', 'Follow the link\'s capacity (autorate)', AUTORATE.map((f) => field(sec, f)));
  const arFs = el('fieldset', {}, el('legend', { text: 'Autorate' }), arF, arBox);

  const status = el('span', { class: 'muted', 'data-save-status': '' });
  const save = el('button', { type: 'submit', text: 'Save and apply' });
  const reset = el('button', { type: 'button', class: 'secondary', text: 'Undo changes', onclick: () => loadConfig() });
  const remove = el('button', { type: 'button', class: 'secondary danger', 'data-remove': '', text: 'Remove queue' });
  remove.addEventListener('click', () => removeSection(remove, sec, form));
  if (role !== 'admin') { save.disabled = true; reset.disabled = true; remove.disabled = true; }
  form.append(basic, qfs, cakeFs, llFs, arFs, el('p', { class: 'err', 'data-form-err': '' }), el('div', { class: 'actions' }, save, reset, remove, status));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); saveSection(form, sec); });
  return form;
}

// changes lists the options whose value differs from the file; an option
// the file does not set counts as changed only if it now differs from its
// default, so saving an untouched form writes nothing.
function changes(form, sec) {
  const set = {};
  for (const inp of form.querySelectorAll('[data-opt]')) {
    const opt = inp.dataset.opt;
    const v = inp.type === 'checkbox' ? (inp.checked ? '1' : '0') : inp.value.trim();
    const cur = sec.options[opt];
    if (cur === undefined ? (v !== '' && v !== inp.dataset.def) : v !== cur) set[opt] = v;
  }
  if (!form.querySelector('[data-cake-box]').hidden) {
    const ds = form.querySelector('[data-cake=diffserv]').value;
    const iso = form.querySelector('[data-cake=isolation]').value;
    const ack = form.querySelector('[data-cake=ack]').value;
    const keep = (s) => words(s).filter((w) => !DIFFSERV.includes(w) && !ISOLATION.includes(w) && !ACK.includes(w));
    const e = keep(set.eqdisc_opts !== undefined ? set.eqdisc_opts : sec.options.eqdisc_opts);
    const i = keep(set.iqdisc_opts !== undefined ? set.iqdisc_opts : sec.options.iqdisc_opts);
    if (ds) { e.push(ds); i.push(ds); }
    if (iso) { if (iso === 'dual-nat') { e.push('nat'); i.push('nat'); } e.push('dual-srchost'); i.push('dual-dsthost'); }
    if (ack) e.push(ack);
    const ej = e.join(' '), ij = i.join(' ');
    if (ej !== (sec.options.eqdisc_opts || '')) set.eqdisc_opts = ej; else delete set.eqdisc_opts;
    if (ij !== (sec.options.iqdisc_opts || '')) set.iqdisc_opts = ij; else delete set.iqdisc_opts;
  }
  return set;
}

async function saveSection(form, sec) {
  for (const e of form.querySelectorAll('.field-err')) e.textContent = '';
  for (const e of form.querySelectorAll('.invalid')) e.classList.remove('invalid');
  const ferr = form.querySelector('[data-form-err]');
  const status = form.querySelector('[data-save-status]');
  ferr.textContent = '';
  const set = changes(form, sec);
  if (!Object.keys(set).length) { status.textContent = 'Nothing changed.'; return; }
  status.className = 'muted'; status.textContent = 'Applying…';
  const btn = form.querySelector('button[type=submit]');
  btn.disabled = true;
  const r = await api('POST', '/api/config', { section: sec.ref, set });
  btn.disabled = false;
  if (r.ok) {
    // The forms are rebuilt from the file as written; the message goes on
    // the new form, so it appears once the page shows the saved state.
    const msg = 'Saved and applied' + (r.data.outcomes && r.data.outcomes.length ? ': ' + r.data.outcomes.join('; ') : '.');
    await loadConfig();
    const nf = document.querySelector(`form[data-section="${CSS.escape(sec.ref)}"] [data-save-status]`);
    if (nf) { nf.className = 'ok-msg'; nf.textContent = msg; }
    loadStatus();
    return;
  }
  status.textContent = '';
  const errs = r.data.errors || [{ message: r.data.error || ('HTTP ' + r.status) }];
  const general = [];
  for (const e of errs) {
    const slot = e.option && form.querySelector(`[data-err="${CSS.escape(e.option)}"]`);
    if (slot) {
      slot.textContent = e.message;
      const inp = form.querySelector(`[data-opt="${CSS.escape(e.option)}"]`);
      if (inp) inp.classList.add('invalid');
    } else general.push((e.option ? e.option + ': ' : '') + e.message);
  }
  if (r.data.rolled_back) general.push('The previous settings were restored.');
  ferr.textContent = general.join('\n');
}

// ---- bufferbloat test -------------------------------------------------------

async function loadTest() {
  const r = await api('GET', '/api/test');
  if (!r.ok) return;
  if (!$('t-server').value && (r.data.server || r.data.default_server)) $('t-server').value = r.data.server || r.data.default_server;
  renderTest(r.data);
}

const PHASE_ORDER = { rrul: ['idle-before', 'load', 'idle-after'], speedtest: ['idle-before', 'download', 'upload', 'idle-after'], idle: ['idle'] };

function renderTest(s) {
  $('t-err').textContent = s.error || '';
  $('t-cancel').hidden = !s.running || role !== 'admin';
  $('t-start').disabled = s.running || role !== 'admin';
  const prog = $('t-progress');
  prog.hidden = !s.running && !(s.phases && s.phases.length);
  if (!prog.hidden) {
    const seen = s.phases || [];
    const order = PHASE_ORDER[$('t-mode').value] || [];
    const names = seen.concat(order.filter((p) => !seen.includes(p)));
    const ol = $('t-phases');
    ol.textContent = '';
    for (const p of names) {
      let cls = '';
      if (s.running && p === s.phase) cls = 'now';
      else if (seen.includes(p)) cls = 'done';
      ol.append(el('li', { class: cls, 'data-phase': p, text: p }));
    }
    const pct = s.total_s ? Math.min(100, 100 * s.elapsed_s / s.total_s) : 0;
    $('t-bar').style.width = (s.running ? pct : 100) + '%';
    $('t-live').textContent = s.running
      ? `${s.phase} · ${s.elapsed_s.toFixed(0)} / ${s.total_s.toFixed(0)} s · ↓ ${s.download_mbps.toFixed(1)} Mbit/s ↑ ${s.upload_mbps.toFixed(1)} Mbit/s · latency ${s.latency_ms.toFixed(1)} ms`
      : (s.result ? 'finished' : (s.error ? 'failed' : ''));
  }
  const res = $('t-result');
  res.hidden = !s.result;
  if (s.result) {
    const g = $('t-grade');
    g.textContent = s.result.grade;
    g.className = 'grade' + (/^[AB]/.test(s.result.grade) ? '' : /^[CD]/.test(s.result.grade) ? ' mid' : ' low');
    const dl = $('t-summary');
    dl.textContent = '';
    const kv = [['Download', s.result.download_mbps.toFixed(1) + ' Mbit/s'], ['Upload', s.result.upload_mbps.toFixed(1) + ' Mbit/s'],
      ['Idle latency', s.result.idle_median_ms.toFixed(1) + ' ms'], ['Loaded latency', s.result.loaded_median_ms.toFixed(1) + ' ms (90 %: ' + s.result.loaded_p90_ms.toFixed(1) + ')'],
      ['Induced', s.result.induced_ms.toFixed(1) + ' ms'], ['Responsiveness', Math.round(s.result.rpm) + ' RPM ' + s.result.rpm_band]];
    for (const [k, v] of kv) dl.append(el('dt', { text: k }), el('dd', { text: v }));
    const src = '/api/test/plot.svg?t=' + encodeURIComponent(s.started || '');
    if ($('t-plot').getAttribute('src') !== src) $('t-plot').src = src;
  }
  clearTimeout(testTimer);
  if (s.running) testTimer = setTimeout(loadTest, 1000);
}

$('test-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('t-err').textContent = '';
  const dur = Number($('t-duration').value);
  if (!(dur >= 1 && dur <= 120)) { $('t-err').textContent = 'Seconds of load: 1 to 120.'; return; }
  const r = await api('POST', '/api/test', { server: $('t-server').value.trim(), mode: $('t-mode').value, duration_s: dur });
  if (!r.ok) { $('t-err').textContent = r.data.error || ('HTTP ' + r.status); return; }
  renderTest(r.data);
});

$('t-cancel').addEventListener('click', async () => {
  const r = await api('POST', '/api/test', { cancel: true });
  if (r.ok) renderTest(r.data);
});

// ---- tune -------------------------------------------------------------------

let tuneSection = ''; // the section of the last tune, from the server

async function loadTune() {
  const r = await api('GET', '/api/tune');
  if (!r.ok) return;
  // Without a tuner in this build (or daemon) there is nothing to offer.
  $('tune').hidden = !r.data.available; $('nav-tune').hidden = !r.data.available;
  if (!r.data.available) return;
  if (!$('u-server').value && (r.data.server || r.data.default_server)) $('u-server').value = r.data.server || r.data.default_server;
  if (r.data.profile) $('u-profile').value = r.data.profile;
  renderTune(r.data);
}

// tuneSections lists the config's queue sections, the tuned one (or the
// first enabled one) chosen.
function tuneSections() {
  if (!config) return;
  const sel = $('u-section');
  const cur = sel.value || tuneSection;
  sel.textContent = '';
  for (const sec of config.sections) {
    const on = (sec.options.enabled || '0') === '1';
    sel.append(el('option', { value: sec.ref, text: (sec.name || sec.ref) + (sec.options.interface ? ' (' + sec.options.interface + ')' : '') + (on ? '' : ', disabled') }));
  }
  const enabled = config.sections.find((sec) => sec.options.enabled === '1');
  if (config.sections.some((sec) => sec.ref === cur)) sel.value = cur;
  else if (enabled) sel.value = enabled.ref;
}

function mmss(s) { s = Math.max(0, Math.round(s)); return Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0'); }

function renderTune(s) {
  tuneSection = s.section || tuneSection;
  if (s.section && $('u-section').querySelector(`option[value="${CSS.escape(s.section)}"]`)) {
    if (s.running || !$('u-section').dataset.touched) $('u-section').value = s.section;
  }
  $('u-err').textContent = s.error || '';
  const admin = role === 'admin';
  $('u-cancel').hidden = !s.running || !admin;
  $('u-start').disabled = s.running || !admin;
  const prog = $('u-progress');
  prog.hidden = !s.running && !(s.lines && s.lines.length);
  if (!prog.hidden) {
    const pct = s.running ? (s.expected ? Math.min(97, 100 * s.done / s.expected) : 2) : 100;
    $('u-bar').style.width = pct + '%';
    let live = '';
    if (s.running) {
      const rate = s.dir === 'both' ? fmtKbit(s.down_kbit) + ' / ' + fmtKbit(s.up_kbit) : fmtKbit(s.dir === 'up' ? s.up_kbit : s.down_kbit);
      live = (s.phase || 'starting') + (s.dir ? ' · ' + s.dir + ' at ' + rate : '');
      if (s.expected) live += ` · point ${s.done + 1} of about ${s.expected}`;
      live += ` · ${mmss(s.elapsed_s)}` + (s.budget_s ? ` of ${mmss(s.budget_s)}` : '');
    } else live = s.result ? `finished in ${mmss(s.elapsed_s)}` : (s.error ? 'failed' : '');
    $('u-live').textContent = live;
    // The lines are the run's log: kept after a failure, which they
    // explain; after a result the table says it all.
    $('u-lines').textContent = s.running || s.error ? (s.lines || []).join('\n') : '';
  }
  const box = $('u-result');
  box.hidden = !s.result;
  if (s.result) renderTuneResult(s);
  $('u-save').disabled = !admin || !s.result;
  $('u-saved').textContent = s.saved || '';
  clearTimeout(tuneTimer);
  if (s.running) tuneTimer = setTimeout(loadTune, 1000);
}

function renderTuneResult(s) {
  const r = s.result;
  const dl = $('u-summary');
  dl.textContent = '';
  const alone = (r.download_kbit !== r.alone_down_kbit || r.upload_kbit !== r.alone_up_kbit) ? ` (each alone ${r.alone_down_kbit} / ${r.alone_up_kbit})` : '';
  const kv = [['Chosen download', r.download_kbit + ' kbit/s'], ['Chosen upload', r.upload_kbit + ' kbit/s' + alone],
    ['Unshaped goodput', Math.round(r.capacity_down_kbit) + ' / ' + Math.round(r.capacity_up_kbit) + ' kbit/s'],
    ['Target', r.target_ms + ' ms induced latency' + (r.profile ? ' (' + r.profile + ')' : '')],
    ['Link layer', (r.linklayer || 'none') + ', overhead ' + r.overhead + ' (' + r.linklayer_source + ')'],
    ['Idle latency', r.idle_median_ms.toFixed(1) + ' ms'], ['Took', mmss(r.seconds) + ', ' + r.points.length + ' points']];
  for (const [k, v] of kv) dl.append(el('dt', { text: k }), el('dd', { text: v }));
  const src = '/api/tune/plot.svg?t=' + encodeURIComponent(s.started || '');
  if ($('u-plot').getAttribute('src') !== src) $('u-plot').src = src;
  const tables = $('u-tables');
  tables.textContent = '';
  tables.append(el('p', { class: 'hint', text: 'Rates and goodput in kbit/s; induced latency (loaded 90th percentile minus the idle median) in ms, judged after each load\'s start burst, shown apart as Start.' }));
  for (const [dir, title] of [['down', 'Download'], ['up', 'Upload'], ['both', 'Both directions loaded']]) {
    const pts = r.points.filter((p) => p.dir === dir);
    if (!pts.length) continue;
    const rate = (p) => dir === 'up' ? p.up_kbit : p.down_kbit;
    // As sqm tune's table: lowest rate first, unshaped last.
    pts.sort((a, b) => (rate(a) || Infinity) - (rate(b) || Infinity));
    const body = el('tbody');
    for (const p of pts) {
      const rt = dir === 'both' ? p.down_kbit + ' / ' + p.up_kbit : (rate(p) ? String(rate(p)) : 'unshaped');
      const good = dir === 'both' ? Math.round(p.goodput_down_kbit) + ' / ' + Math.round(p.goodput_up_kbit) : String(Math.round(dir === 'up' ? p.goodput_up_kbit : p.goodput_down_kbit));
      const verdict = [p.chosen ? 'chosen' : '', p.pass ? 'ok' : 'over target', p.role === 'reference' ? 'reference again' : '', p.stale ? 'stale' : ''].filter(Boolean).join(', ');
      body.append(el('tr', { class: p.chosen ? 'chosen' : '', 'data-dir': dir },
        el('td', { text: rt }), el('td', { text: good }), el('td', { class: p.pass ? '' : 'miss', text: p.induced_ms.toFixed(1) }),
        el('td', { text: p.start_induced_ms.toFixed(1) }), el('td', { text: p.grade }), el('td', { text: verdict })));
    }
    const head = el('thead', {}, el('tr', {}, ...['Rate', 'Goodput', 'Induced', 'Start', 'Grade', ''].map((h) => el('th', { text: h }))));
    tables.append(el('h4', { text: title }), el('div', { class: 'scroll' }, el('table', { class: 'points' }, head, body)));
  }
  const notes = $('u-notes');
  notes.textContent = '';
  for (const n of r.notes || []) notes.append(el('li', { text: n }));
}

$('u-section').addEventListener('change', () => { $('u-section').dataset.touched = '1'; });

$('tune-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  $('u-err').textContent = ''; $('u-save-err').textContent = '';
  const section = $('u-section').value;
  if (!section) { $('u-err').textContent = 'There is no queue section to tune.'; return; }
  const r = await api('POST', '/api/tune', { section, server: $('u-server').value.trim(), profile: $('u-profile').value, detect: $('u-detect').checked });
  if (!r.ok) { $('u-err').textContent = r.data.error || ('HTTP ' + r.status); return; }
  renderTune(r.data);
});

$('u-cancel').addEventListener('click', async () => {
  const r = await api('POST', '/api/tune', { cancel: true });
  if (r.ok) renderTune(r.data);
});

$('u-save').addEventListener('click', async () => {
  $('u-save-err').textContent = ''; $('u-saved').textContent = 'Saving…';
  $('u-save').disabled = true;
  const r = await api('POST', '/api/tune/save', {});
  $('u-save').disabled = role !== 'admin';
  if (!r.ok) {
    $('u-saved').textContent = '';
    const msgs = (r.data.errors || [{ message: r.data.error || ('HTTP ' + r.status) }]).map((e) => e.message);
    if (r.data.rolled_back) msgs.push('The previous settings were restored.');
    $('u-save-err').textContent = msgs.join('\n');
    return;
  }
  await loadTune();
  await loadConfig();
  loadStatus();
});

// ---- start ------------------------------------------------------------------

(async () => {
  const r = await api('GET', '/api/session').catch(() => null);
  if (r && r.ok) showApp(r.data); else showLogin();
})();
