// The dashboard's page: plain JavaScript, no framework. It asks the server's JSON API (/api/...) and follows
// its server-sent events (/api/watch...), so that a change in the cluster shows without a reload. Text from
// the cluster is only ever set as textContent, never parsed as HTML.
'use strict';

const STAGES = ['Pending', 'Queued', 'Suspended', 'Initializing', 'Training', 'Complete', 'Failed'];

const state = {
  config: null,
  list: null,           // the last TrainJobs event
  rows: null,           // the list's rows as filtered and sorted, and those drawn: { rows, cols, first, last }
  rowHeight: 0,         // the height of a row of the list, as drawn
  listError: null,      // the last error event of the list
  filter: '',
  stage: '',
  sort: 'created',
  desc: true,
  source: null,         // the EventSource of the view shown
  detail: null,         // the last TrainJob event
  logPod: '',
  logAbort: null,
  samples: [],          // the trainer's status as the pushes brought it: { t, percentage, metrics }
  metric: null,         // the log metric's last fetch: { at, busy }
  gpusTimer: null,      // reads the GPUs view again while it is shown
  notice: '',           // what the last action printed, shown atop the next view
};

// el makes an element with attributes (class, data-*, …) and children (elements or text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function stageBadge(stage) {
  return el('span', { class: 'stage stage-' + stage, 'data-stage': stage }, stage);
}

// age is kubectl's: 45s, 3m12s, 5h, 2d3h; of t, a time as JSON writes it or in milliseconds since the epoch.
function age(t) {
  if (!t) return '-';
  const s = Math.max(0, Math.floor((Date.now() - new Date(t)) / 1000));
  if (s < 120) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 10) return m + 'm' + (s % 60 ? (s % 60) + 's' : '');
  if (m < 180) return m + 'm';
  const h = Math.floor(m / 60);
  if (h < 48) return h + 'h';
  const d = Math.floor(h / 24);
  return d + 'd' + (h % 24 ? (h % 24) + 'h' : '');
}

// CLOCK writes a date and time as toLocaleString does, made once: toLocaleString makes a formatter at every
// call, which a table of 1 024 pods pays 1 024 times.
const CLOCK = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });

function clock(t) {
  return t ? CLOCK.format(new Date(t)) : '-';
}

// shortClock is t's time of day, with its date only when that is not today's.
function shortClock(t) {
  if (!t) return '-';
  const d = new Date(t);
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

function setLive(text, ok) {
  const live = document.getElementById('live');
  live.textContent = text;
  live.className = 'live ' + (ok ? 'live-ok' : 'live-down');
}

// follow opens the server-sent events of url, calling on[name] with each event's data; it replaces the view's
// previous stream.
function follow(url, on) {
  if (state.source) state.source.close();
  const src = new EventSource(url);
  state.source = src;
  src.onopen = () => setLive('live', true);
  src.onerror = () => setLive('reconnecting', false);
  for (const [name, fn] of Object.entries(on)) {
    src.addEventListener(name, (ev) => fn(JSON.parse(ev.data)));
  }
}

// api asks the server's JSON API, with body: a string as it is (the YAML /api/fit takes), anything else as JSON.
async function api(method, path, body) {
  const init = { method, headers: { 'Accept': 'application/json' } };
  if (typeof body === 'string') {
    init.body = body;
  } else if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const answer = await resp.json().catch(() => ({ error: resp.statusText }));
  if (!resp.ok) {
    const err = new Error(answer.error || resp.statusText);
    err.forbidden = !!answer.forbidden;
    throw err;
  }
  return answer;
}

// errorBox says what could not be read; a read the user's RBAC refused says Forbidden.
function errorBox(err) {
  return el('div', { class: err.forbidden ? 'error forbidden' : 'error', role: 'alert' },
    el('strong', {}, err.forbidden ? 'Forbidden: ' : 'Error: '), err.error || err.message);
}

// ---- The list of TrainJobs ----

const COLUMNS = [
  { key: 'namespace', title: 'Namespace', all: true },
  { key: 'name', title: 'Name' },
  { key: 'stage', title: 'Stage' },
  { key: 'runtime', title: 'Runtime' },
  { key: 'nodes', title: 'Nodes', num: true },
  { key: 'gpus', title: 'GPUs', num: true },
  { key: 'progress', title: 'Progress', num: true },
  { key: 'eta', title: 'ETA' },
  { key: 'queue', title: 'Queue' },
  { key: 'position', title: 'Position' },
  { key: 'created', title: 'Age' },
];

function showList() {
  const main = document.getElementById('main');
  main.replaceChildren();
  const filter = el('input', { type: 'search', id: 'filter', placeholder: 'Filter by name, runtime, reason…', value: state.filter });
  filter.addEventListener('input', () => { state.filter = filter.value; renderRows(); });
  const stage = el('select', { id: 'stage-filter', 'aria-label': 'Stage' },
    el('option', { value: '' }, 'Every stage'), STAGES.map((s) => el('option', { value: s, selected: s === state.stage }, s)));
  stage.addEventListener('change', () => { state.stage = stage.value; renderRows(); });
  main.append(
    el('div', { class: 'toolbar' }, filter, stage, el('span', { id: 'count', class: 'muted' })),
    el('div', { id: 'list-error' }),
    el('div', { class: 'scroll' }, el('table', { id: 'trainjobs', class: 'grid' }, el('thead'), el('tbody'))));
  follow('/api/watch', {
    trainjobs: (data) => { state.list = listOf(data); state.listError = null; renderRows(); },
    error: (err) => { state.listError = err; renderRows(); },
  });
  renderRows();
}

// listOf is the server's list with each row, an array of the cells its columns name, made an object of them;
// created, in seconds since the epoch, in milliseconds as Date takes them.
function listOf(data) {
  const cols = data.columns;
  const items = data.items.map((cells) => {
    const r = {};
    for (let i = 0; i < cols.length; i++) r[cols[i]] = cells[i];
    r.created *= 1000;
    return r;
  });
  return { namespace: data.namespace, items };
}

function sortValue(row, key) {
  switch (key) {
    case 'nodes': case 'gpus': return Number(row[key]) || -1;
    case 'progress': return row.percentage ?? -1;
    case 'stage': return STAGES.indexOf(row.stage);
    default: return row[key] || '';
  }
}

function renderRows() {
  const table = document.getElementById('trainjobs');
  if (!table) return;
  const errBox = document.getElementById('list-error');
  errBox.replaceChildren(state.listError ? errorBox(state.listError) : '');
  const all = state.config && state.config.namespace === '';
  const cols = COLUMNS.filter((c) => !c.all || all);
  const head = el('tr', {}, cols.map((c) => {
    const th = el('th', { 'data-key': c.key, class: 'sortable' + (state.sort === c.key ? (state.desc ? ' desc' : ' asc') : '') }, c.title);
    th.addEventListener('click', () => {
      state.desc = state.sort === c.key ? !state.desc : c.key === 'created';
      state.sort = c.key;
      renderRows();
    });
    return th;
  }));
  table.tHead.replaceChildren(head);
  state.rows = null;
  if (!state.list) {
    table.tBodies[0].replaceChildren(el('tr', {}, el('td', { colspan: cols.length, class: 'muted' }, state.listError ? '' : 'Loading…')));
    return;
  }
  const text = state.filter.toLowerCase();
  const rows = state.list.items.filter((r) => (!state.stage || r.stage === state.stage) &&
    (!text || [r.namespace, r.name, r.runtime, r.reason, r.queue].join(' ').toLowerCase().includes(text)));
  const keys = new Map(rows.map((r) => [r, sortValue(r, state.sort)]));
  rows.sort((a, b) => {
    const x = keys.get(a), y = keys.get(b);
    const c = x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    return state.desc ? -c : c;
  });
  document.getElementById('count').textContent = rows.length + ' of ' + state.list.items.length + ' TrainJobs';
  table.dataset.rows = rows.length;
  if (rows.length === 0) {
    table.tBodies[0].replaceChildren(el('tr', {}, el('td', { colspan: cols.length, class: 'muted' },
      state.list.items.length ? 'No TrainJob matches.' : 'No TrainJobs in ' + (all ? 'any namespace' : 'namespace ' + state.list.namespace) + '.')));
  } else {
    state.rows = { rows, cols, first: -1, last: -1 };
    drawWindow();
  }
  shown('trainjobs-shown');
}

// WINDOW_MARGIN is how many rows the list draws above and below those in view.
const WINDOW_MARGIN = 20;

// drawWindow draws the rows of the list that are in view (and WINDOW_MARGIN either side) between two spacers as
// tall as the rows above and below them, so that the page scrolls through every row while drawing only a few
// dozen: a list of 10 000 TrainJobs draws as fast as one of 50. It draws again as the page scrolls.
function drawWindow(force = true) {
  const table = document.getElementById('trainjobs');
  const w = state.rows;
  if (!table || !w) return;
  const body = table.tBodies[0];
  const h = state.rowHeight || 32;
  const above = Math.max(0, -body.getBoundingClientRect().top);
  const first = Math.max(0, Math.floor(above / h) - WINDOW_MARGIN);
  const last = Math.min(w.rows.length, Math.ceil((above + window.innerHeight) / h) + WINDOW_MARGIN);
  if (!force && first === w.first && last === w.last) return;
  w.first = first;
  w.last = last;
  const spacer = () => el('tr', { class: 'spacer', 'aria-hidden': 'true' }, el('td', { colspan: w.cols.length }));
  const trs = w.rows.slice(first, last).map((r) => rowOfList(r, w.cols));
  const [top, bottom] = [spacer(), spacer()];
  const size = (h) => {
    top.firstChild.style.height = (first * h) + 'px';
    bottom.firstChild.style.height = ((w.rows.length - last) * h) + 'px';
  };
  size(h);
  body.replaceChildren(top, ...trs, bottom);
  sizeBars(body);
  const drawn = trs[0].getBoundingClientRect().height;
  if (drawn > 0 && Math.abs(drawn - h) > 0.5) {
    // The first draw measures the rows' height, which the spacers take. At the top of the list the rows drawn
    // fill the view whatever their height (the margin): only the spacers change.
    state.rowHeight = drawn;
    if (first > 0) drawWindow();
    else size(drawn);
  }
}

// rowOfList is the list's row of TrainJob r, which opens its page on a click or Enter.
function rowOfList(r, cols) {
  const href = '#/trainjob/' + encodeURIComponent(r.namespace) + '/' + encodeURIComponent(r.name);
  const tr = el('tr', { class: 'row', 'data-name': r.name, 'data-namespace': r.namespace, tabindex: 0 }, cols.map((c) => {
    switch (c.key) {
      case 'name': return el('td', {}, el('a', { href }, r.name));
      case 'stage': return el('td', { title: r.reason }, stageBadge(r.stage));
      case 'progress': return el('td', {}, r.percentage == null ? '-' : progressBar(r.percentage));
      case 'created': return el('td', { title: clock(r.created) }, age(r.created));
      case 'position': return el('td', { class: 'position' }, r.position || '-');
      default: return el('td', { class: c.num ? 'num' : '' }, r[c.key]);
    }
  }));
  tr.addEventListener('click', (ev) => { if (ev.target.tagName !== 'A') location.hash = href; });
  tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') location.hash = href; });
  return tr;
}

// The list draws again the rows that scrolling brings into view, once a frame.
let windowFrame = 0;
function scrolled() {
  if (windowFrame) return;
  windowFrame = requestAnimationFrame(() => { windowFrame = 0; drawWindow(false); });
}
window.addEventListener('scroll', scrolled, { passive: true });
window.addEventListener('resize', scrolled);

// shown marks, once, when a view first showed the server's data, after the frame that draws it: make bench-scale
// reads the mark (performance.getEntriesByName) to time the list's first paint and a TrainJob's page.
function shown(mark) {
  if (performance.getEntriesByName(mark).length) return;
  afterFrame(() => { if (!performance.getEntriesByName(mark).length) performance.mark(mark); });
}

// afterFrame calls fn once the next frame is drawn.
function afterFrame(fn) {
  requestAnimationFrame(() => setTimeout(fn));
}

function progressBar(pct) {
  return el('span', { class: 'progress', title: pct + '%' },
    el('span', { class: 'bar', style: null, 'data-pct': pct }), el('span', { class: 'pct' }, pct + '%'));
}

// The CSP forbids inline styles set from markup, not through the CSSOM: bars are sized here.
function sizeBars(root) {
  for (const b of root.querySelectorAll('.bar[data-pct]')) b.style.width = Math.min(100, Number(b.dataset.pct)) + '%';
}

// ---- One TrainJob ----

function showTrainJob(namespace, name) {
  const main = document.getElementById('main');
  state.detail = null;
  state.samples = [];
  state.metric = null;
  stopLog();
  main.replaceChildren(
    el('nav', { class: 'crumbs' }, el('a', { href: '#/' }, 'TrainJobs'), ' / ', namespace, ' / ', el('strong', {}, name)),
    el('div', { id: 'detail' }, el('p', { class: 'muted' }, 'Loading…')),
    chartsPanel(namespace, name),
    logPanel(namespace, name),
    section('Pipeline plugins', el('div', { id: 'describe-pipeline' }, el('p', { class: 'muted' }, 'Loading…'))));
  loadDescribe(namespace, name);
  follow('/api/watch/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name), {
    trainjob: (data) => {
      state.detail = data;
      renderDetail(namespace, name);
      sampleProgress(data.summary.progress);
      renderProgressCharts();
      // After the frame that draws the page: the ranks' logs are read once it shows.
      afterFrame(() => loadMetric(namespace, name, false));
    },
    error: (err) => { document.getElementById('detail').replaceChildren(errorBox(err)); },
  });
}

function section(title, ...children) {
  return el('section', { class: 'card' }, el('h2', {}, title), ...children);
}

function table(headers, rows, id) {
  return el('div', { class: 'scroll' }, el('table', { class: 'grid', id },
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) => el('td', {}, c ?? '-')))))));
}

function renderDetail(namespace, name) {
  const d = state.detail;
  const s = d.summary;
  const out = [];
  const head = el('div', { class: 'title' }, el('h1', {}, s.name), stageBadge(s.stage), el('span', { id: 'reason', class: 'reason' }, s.reason || ''));
  if (state.config && state.config.allowWrites) {
    if (!['Complete', 'Failed'].includes(s.stage)) {
      head.append(actionButton(namespace, name, 'suspend', 'Suspend'), actionButton(namespace, name, 'resume', 'Resume'));
    }
    head.append(rerunButton(namespace, name), deleteButton(namespace, name));
  }
  out.push(head, el('div', { id: 'action-result', class: 'muted' }));
  out.push(el('p', { class: 'muted' }, 'Runtime ', s.runtime, ' · created ', clock(s.created), ' (', age(s.created), ' ago)'));
  if (s.progress && s.progress.percentage != null) {
    out.push(el('div', { class: 'card' }, el('strong', {}, 'Progress '), progressBar(s.progress.percentage),
      s.progress.remainingSeconds != null ? el('span', { class: 'muted' }, ' ', s.progress.remainingSeconds, 's left') : null,
      (s.progress.metrics || []).map((m) => el('span', { class: 'metric' }, m.name, ' ', m.value))));
  }
  if (s.firstFailure) out.push(failureCard(s.firstFailure, d.firstFailureText, d.firstFailureNoLog));
  out.push(section('Pipeline', pipeline(s.stages)));
  out.push(section('Ranks', rankGrid(s.pods)));
  out.push(section('Replicated jobs', table(['Name', 'Ready', 'Active', 'Succeeded', 'Failed', 'Suspended'],
    s.jobs.map((j) => [j.name, j.ready, j.active, j.succeeded, j.failed, j.suspended]))));
  out.push(section('Timeline', table(['Time', 'Since', 'Source', 'Type', 'Status', 'Reason', 'Message'],
    s.timeline.map((e) => [clock(e.time), e.since, e.source, e.type, e.status, e.reason, (e.message || '') + (e.count > 1 ? ' (×' + e.count + ')' : '')]))));
  if (s.warnings && s.warnings.length) {
    out.push(section('Warnings', table(['Last seen', 'Object', 'Reason', 'Message'],
      s.warnings.map((w) => [clock(w.lastSeen), w.object, w.reason, w.message]))));
  }
  out.push(section('Jobs', table(['Name', 'Replicated job', 'Completions', 'Active', 'Succeeded', 'Failed', 'Status'],
    (d.jobs || []).map((j) => [j.name, j.replicatedJob, j.completions, j.active, j.succeeded, j.failed, j.status]), 'jobs')));
  out.push(section('Pods', el('details', { id: 'pods-details' }, el('summary', {}, s.pods.length + ' pods'),
    table(['Name', 'Replicated job', 'Rank', 'Node', 'GPUs', 'Status', 'Restarts', 'Started'],
      s.pods.map((p) => [p.name, p.replicatedJob, p.rank, p.node, p.gpus, p.status, p.restarts, p.started ? clock(p.started) : '-']), 'pods'))));
  if (s.queue) out.push(queueCard(s.queue));
  out.push(section('YAML',
    yamlBlock('yaml-trainjob', 'TrainJob', d.trainJobYAML),
    yamlBlock('yaml-jobset', 'JobSet', d.jobSetYAML || d.jobSetError || ''),
    d.workloadYAML ? yamlBlock('yaml-workload', 'Kueue Workload', d.workloadYAML) : null,
    yamlBlock('yaml-runtime', 'Runtime snapshot', d.runtimeYAML || d.runtimeError || '')));
  const detail = document.getElementById('detail');
  // The page is drawn again at every change: what the user opened stays open.
  const open = [...detail.querySelectorAll('details[open][id]')].map((e) => e.id);
  detail.replaceChildren(...out);
  for (const id of open) { const e = document.getElementById(id); if (e) e.open = true; }
  sizeBars(detail);
  updateLogPicker(s.pods);
  shown('trainjob-shown');
}

function yamlBlock(id, title, text) {
  return el('details', { id }, el('summary', {}, title), el('pre', { class: 'yaml' }, text));
}

// queueCard is what Kueue says of the TrainJob, as status says it.
function queueCard(q) {
  const rows = [['LocalQueue', q.localQueue], ['ClusterQueue', q.clusterQueue], ['Workload', q.workload], ['Priority', q.priority],
    ['Priority class', q.priorityClass], ['Position', q.position], ['Admitted', q.admitted === undefined ? undefined : (q.admitted ? 'yes' : 'no')],
    ['Not admitted', q.notAdmitted], ['Kueue', q.note]];
  return section('Kueue', el('dl', { class: 'facts', id: 'kueue' },
    rows.filter(([, v]) => v !== undefined && v !== null && v !== '').flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
}

// loadDescribe draws describe-pipeline's table: each plugin of each extension point and what it changed, as the
// binary's operator builds the TrainJob.
async function loadDescribe(namespace, name) {
  const box = document.getElementById('describe-pipeline');
  let d;
  try {
    d = await api('GET', '/api/trainjobs/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name) + '/pipeline');
  } catch (e) {
    box.replaceChildren(errorBox(e));
    return;
  }
  const rows = [];
  for (const ph of d.phases || []) {
    for (const pt of ph.extensionPoints || []) {
      if (!pt.plugins || !pt.plugins.length) rows.push([ph.name, pt.name, '(no plugin)', '-']);
      for (const p of pt.plugins || []) {
        const what = [...(p.changes || []).map((c) => c.where + ': ' + c.what), ...(p.objects || []).map((o) => 'builds ' + o)];
        if (p.result) what.push(p.result);
        rows.push([ph.name, pt.name, p.name, what.join('\n') || '-']);
      }
    }
  }
  box.replaceChildren(el('p', { class: 'muted' }, 'Runtime ', d.runtime),
    table(['Phase', 'Extension point', 'Plugin', 'What it changed'], rows, 'describe-table'),
    ...(d.warnings || []).map((w) => el('p', { class: 'muted' }, 'Warning: ', w)),
    d.error ? errorBox({ error: d.error }) : '');
}

function failureCard(f, text, noLog) {
  return el('section', { class: 'card failure', id: 'first-failure' },
    el('h2', {}, 'First failure'),
    el('p', {}, el('strong', {}, text || f.reason)),
    el('dl', {},
      [['Pod', f.pod], ['Rank', f.rank], ['Replicated job', f.replicatedJob], ['Node', f.node], ['Container', f.container],
        ['Exit code', f.exitCode], ['Reason', f.reason], ['When', clock(f.time)], ['Restarts', f.restarts]]
        .filter(([, v]) => v !== undefined && v !== '').flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    f.message ? el('p', {}, f.message) : null,
    f.log ? el('pre', { class: 'log' }, f.log.join('\n')) : noLog ? el('p', { class: 'muted', id: 'first-failure-log' }, noLog) : null);
}

// pipeline draws the stages as a timeline: one bar per stage, placed and sized by its start and end.
function pipeline(stages) {
  const known = stages.filter((st) => st.start);
  const t0 = known.length ? Date.parse(known[0].start) : Date.now();
  const end = (st) => st.end ? Date.parse(st.end) : Date.now();
  const t1 = Math.max(t0 + 1000, ...known.map(end));
  const rows = stages.map((st) => {
    const bar = el('div', { class: 'span stage-' + st.name });
    if (st.start) {
      bar.dataset.left = (100 * (Date.parse(st.start) - t0) / (t1 - t0)).toFixed(2);
      bar.dataset.width = Math.max(0.5, 100 * (end(st) - Date.parse(st.start)) / (t1 - t0)).toFixed(2);
    }
    return el('div', { class: 'pipeline-row', 'data-stage': st.name },
      el('span', { class: 'pipeline-name' }, stageBadge(st.name)),
      el('span', { class: 'pipeline-track' }, bar),
      el('span', { class: 'pipeline-time muted', title: st.start ? clock(st.start) + ' → ' + (st.end ? clock(st.end) : 'now') : null },
        st.start ? shortClock(st.start) + (st.end ? ' → ' + shortClock(st.end) : ' → now') : 'not begun',
        st.duration ? ' (' + st.duration + ')' : ''));
  });
  const box = el('div', { class: 'pipeline' }, rows);
  for (const b of box.querySelectorAll('.span[data-left]')) {
    b.style.marginLeft = b.dataset.left + '%';
    b.style.width = b.dataset.width + '%';
  }
  return box;
}

// podClass colours a pod by phase, restarts and readiness, as the CLI colours stages.
function podClass(p) {
  if (p.phase === 'Failed' || /Error|BackOff|OOMKilled|Evicted/.test(p.status)) return 'pod-failed';
  if (p.phase === 'Succeeded') return 'pod-succeeded';
  if (p.phase === 'Running') return p.restarts > 0 ? 'pod-restarted' : 'pod-running';
  return 'pod-pending';
}

// rankGrid is one small cell per pod, in rank order within each replicated job: legible at 1 024 ranks.
function rankGrid(pods) {
  if (!pods.length) return el('p', { class: 'muted' }, 'No pods.');
  const byJob = new Map();
  for (const p of pods) {
    if (!byJob.has(p.replicatedJob)) byJob.set(p.replicatedJob, []);
    byJob.get(p.replicatedJob).push(p);
  }
  const counts = {};
  for (const p of pods) counts[podClass(p)] = (counts[podClass(p)] || 0) + 1;
  const legend = el('div', { class: 'legend' }, [['pod-running', 'Running'], ['pod-restarted', 'Restarted'], ['pod-pending', 'Pending'],
    ['pod-succeeded', 'Succeeded'], ['pod-failed', 'Failed']].map(([c, t]) => el('span', {}, el('i', { class: 'cell ' + c }), t, ' ', counts[c] || 0)));
  const groups = [...byJob].map(([job, ps]) => el('div', { class: 'rank-group' }, el('h3', {}, job || 'pods', ' ', el('span', { class: 'muted' }, ps.length)),
    el('div', { class: 'ranks' }, ps.map((p) => el('button', {
      class: 'cell ' + podClass(p), 'data-pod': p.name, 'data-rank': p.rank || '',
      title: p.name + '\nrank ' + (p.rank || '-') + ' · node ' + (p.node || '-') + '\n' + p.status + (p.restarts ? ', ' + p.restarts + ' restarts' : ''),
      'aria-label': 'pod ' + p.name,
    })))));
  const grid = el('div', {}, legend, groups);
  // One listener for every cell: a click on a cell opens its pod's log.
  grid.addEventListener('click', (ev) => {
    const cell = ev.target.closest('.cell[data-pod]');
    if (cell) openLog(cell.dataset.pod);
  });
  return grid;
}

// ---- Charts ----

const SVG = 'http://www.w3.org/2000/svg';

// svg makes an SVG element with attributes and children.
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// seriesColour tells series apart: hues spread around the wheel.
function seriesColour(i) {
  return 'hsl(' + Math.round((i * 137.5) % 360) + ', 65%, 45%)';
}

// ticks are n+1 round values from lo to hi.
function ticks(lo, hi, n) {
  return Array.from({ length: n + 1 }, (_, i) => lo + (hi - lo) * i / n);
}

function shortNumber(v) {
  return Math.abs(v) >= 1000 || (v !== 0 && Math.abs(v) < 0.01) ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

// lineChart draws series ([{ name, points: [[x, y], …] }]) as lines on shared axes, in plain SVG: a point is a
// circle whose title says its series, x and y (while there are few enough to hover). formatX writes an x.
function lineChart(id, series, xTitle, formatX) {
  const W = 640, H = 200, L = 52, R = 12, T = 10, B = 34;
  const all = series.flatMap((s) => s.points);
  if (!all.length) return el('p', { class: 'muted', id }, 'No points yet.');
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= Math.abs(y0) / 2 || 1; y1 += Math.abs(y1) / 2 || 1; }
  const sx = (x) => L + (W - L - R) * (x - x0) / (x1 - x0);
  const sy = (y) => H - B - (H - T - B) * (y - y0) / (y1 - y0);
  const axes = svg('g', { class: 'axes' },
    svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B }), svg('line', { x1: L, y1: T, x2: L, y2: H - B }),
    ticks(y0, y1, 4).map((y) => svg('text', { x: L - 6, y: sy(y) + 4, 'text-anchor': 'end' }, shortNumber(y))),
    ticks(x0, x1, 4).map((x) => svg('text', { x: sx(x), y: H - B + 16, 'text-anchor': 'middle' }, formatX(x))),
    svg('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle', class: 'axis-title' }, xTitle));
  const dots = all.length <= 1500;
  const lines = series.map((s, i) => svg('g', { class: 'series', 'data-series': s.name, stroke: seriesColour(i), fill: seriesColour(i) },
    svg('polyline', { fill: 'none', points: s.points.map((p) => sx(p[0]).toFixed(1) + ',' + sy(p[1]).toFixed(1)).join(' ') }),
    dots ? s.points.map((p) => svg('circle', { cx: sx(p[0]).toFixed(1), cy: sy(p[1]).toFixed(1), r: 2.5, 'data-x': p[0], 'data-y': p[1] },
      svg('title', {}, s.name + ' · ' + xTitle + ' ' + formatX(p[0]) + ': ' + p[1]))) : null));
  const legend = series.length > 1 ? el('div', { class: 'legend' }, series.slice(0, 32).map((s, i) => {
    const swatch = el('i', { class: 'cell' });
    swatch.dataset.colour = seriesColour(i);
    return el('span', {}, swatch, s.name);
  }), series.length > 32 ? el('span', { class: 'muted' }, '+' + (series.length - 32) + ' more') : null) : null;
  const box = el('div', { class: 'chart', id }, legend);
  box.append(svg('svg', { viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': xTitle + ' chart' }, axes, lines));
  for (const sw of box.querySelectorAll('[data-colour]')) sw.style.background = sw.dataset.colour;
  return box;
}

// sampleProgress keeps the trainer's status of a push when it is a new report (its time moved): the progress
// chart shows what the page received while open, nothing from before.
function sampleProgress(p) {
  if (!p || (p.percentage == null && !(p.metrics || []).length)) return;
  const t = p.lastUpdated ? Date.parse(p.lastUpdated) : Date.now();
  const metrics = {};
  for (const m of p.metrics || []) {
    const v = Number(m.value);
    if (m.value !== '' && Number.isFinite(v)) metrics[m.name] = v;
  }
  const last = state.samples[state.samples.length - 1];
  const same = last && (p.lastUpdated ? last.t === t : last.percentage === p.percentage && JSON.stringify(last.metrics) === JSON.stringify(metrics));
  if (!same) state.samples.push({ t, percentage: p.percentage, metrics });
}

// renderProgressCharts draws the progress and each numeric metric of the trainer's status over time.
function renderProgressCharts() {
  const box = document.getElementById('chart-progress');
  if (!box) return;
  const time = (t) => new Date(t).toLocaleTimeString();
  const charts = [];
  const pct = state.samples.filter((s) => s.percentage != null).map((s) => [s.t, s.percentage]);
  if (pct.length) charts.push(el('h3', {}, 'Progress (%)'), lineChart('chart-percentage', [{ name: 'progress', points: pct }], 'time', time));
  const names = [...new Set(state.samples.flatMap((s) => Object.keys(s.metrics)))].sort();
  for (const n of names) {
    const pts = state.samples.filter((s) => n in s.metrics).map((s) => [s.t, s.metrics[n]]);
    charts.push(el('h3', {}, n), lineChart('chart-trainer-' + n, [{ name: n, points: pts }], 'time', time));
  }
  box.replaceChildren(...(charts.length ? charts : [el('p', { class: 'muted' },
    'The trainer reports no progress (status.trainerStatus); the page charts each report it receives while open.')]));
}

// The log metric: how many ranks it reads at most, and how often it reads them again while pushes come.
const METRIC_RANKS = 32;
const METRIC_EVERY = 5000;

function chartsPanel(namespace, name) {
  const expr = el('input', { type: 'search', id: 'metric-regexp', value: 'loss', 'aria-label': 'metric',
    placeholder: 'a regular expression: the number after it is the value' });
  expr.addEventListener('change', () => loadMetric(namespace, name, true));
  const box = section('Charts',
    el('div', { id: 'chart-progress' }),
    el('h3', {}, 'From the logs, per rank'),
    el('div', { class: 'toolbar' }, expr, el('span', { id: 'metric-note', class: 'muted' })),
    el('div', { id: 'chart-metric' }));
  box.id = 'charts';
  return box;
}

// loadMetric parses the metric of the box from the logs of the ranks (the first METRIC_RANKS), at most every
// METRIC_EVERY ms unless now.
async function loadMetric(namespace, name, now) {
  const box = document.getElementById('chart-metric');
  if (!box || !state.detail) return;
  const m = state.metric || {};
  if (m.busy || (!now && m.at && Date.now() - m.at < METRIC_EVERY)) return;
  state.metric = { at: Date.now(), busy: true };
  const expr = document.getElementById('metric-regexp').value;
  const pods = state.detail.summary.pods.filter((p) => p.phase !== 'Pending');
  const shown = pods.slice(0, METRIC_RANKS);
  const base = '/api/trainjobs/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name) + '/metric?';
  const results = await Promise.all(shown.map((p) => api('GET', base + new URLSearchParams({ pod: p.name, regexp: expr }))
    .then((r) => ({ pod: p, points: r.points }), (e) => ({ pod: p, error: e }))));
  state.metric.busy = false;
  if (document.getElementById('chart-metric') !== box) return;
  const bad = results.filter((r) => r.error);
  const series = results.filter((r) => r.points && r.points.length)
    .map((r) => ({ name: (r.pod.replicatedJob || 'pod') + ' rank ' + (r.pod.rank || '-'), points: r.points.map((p) => [p.step, p.value]) }));
  document.getElementById('metric-note').textContent = [
    pods.length > shown.length ? 'the first ' + shown.length + ' of ' + pods.length + ' ranks' : '',
    bad.length ? 'the log of ' + bad.length + ' of ' + shown.length + ' ranks could not be read (' + bad[0].pod.name + ': ' + bad[0].error.message + ')' : '',
  ].filter(Boolean).join('; ');
  box.replaceChildren(series.length ? lineChart('chart-metric-lines', series, 'step', String)
    : el('p', { class: 'muted' }, pods.length ? 'No line of the ranks\' logs matches ' + expr + ' followed by a number.' : 'No rank runs yet.'));
}

// ---- Logs ----

function logPanel(namespace, name) {
  const picker = el('select', { id: 'log-pod', 'aria-label': 'Pod' }, el('option', { value: '' }, 'Pick a rank…'));
  const followBox = el('input', { type: 'checkbox', id: 'log-follow', checked: true });
  const previous = el('input', { type: 'checkbox', id: 'log-previous' });
  const failedOnly = el('input', { type: 'checkbox', id: 'log-failed' });
  const grep = el('input', { type: 'search', id: 'log-grep', placeholder: 'grep (regular expression)', 'aria-label': 'grep' });
  const out = el('pre', { id: 'log', class: 'log' });
  const start = () => startLog(namespace, name, picker.value, followBox.checked, previous.checked, grep.value);
  picker.addEventListener('change', start);
  followBox.addEventListener('change', start);
  previous.addEventListener('change', start);
  grep.addEventListener('change', start);
  failedOnly.addEventListener('change', () => { if (state.detail) updateLogPicker(state.detail.summary.pods); });
  return section('Logs', el('div', { class: 'toolbar' }, picker, grep,
    el('label', {}, followBox, ' follow'), el('label', {}, previous, ' previous container'),
    el('label', {}, failedOnly, ' failed ranks only')), out);
}

// updateLogPicker offers the pods' logs, only those of failed or restarted ranks when the box says so.
function updateLogPicker(pods) {
  const picker = document.getElementById('log-pod');
  if (!picker) return;
  const failedOnly = document.getElementById('log-failed').checked;
  pods = pods.filter((p) => !failedOnly || ['pod-failed', 'pod-restarted'].includes(podClass(p)) || p.restarts > 0);
  const want = pods.map((p) => p.name);
  const have = [...picker.options].slice(1).map((o) => o.value);
  if (want.join() === have.join()) return;
  const current = picker.value;
  picker.replaceChildren(el('option', { value: '' }, 'Pick a rank…'),
    ...pods.map((p) => el('option', { value: p.name, selected: p.name === current }, (p.replicatedJob || '') + ' rank ' + (p.rank || '-') + ' · ' + p.name)));
}

function openLog(pod) {
  const picker = document.getElementById('log-pod');
  picker.value = pod;
  picker.dispatchEvent(new Event('change'));
  document.getElementById('log').scrollIntoView({ block: 'nearest' });
}

function stopLog() {
  if (state.logAbort) state.logAbort.abort();
  state.logAbort = null;
}

async function startLog(namespace, name, pod, followLog, previous, grep) {
  stopLog();
  const out = document.getElementById('log');
  out.textContent = '';
  if (!pod) return;
  const abort = new AbortController();
  state.logAbort = abort;
  const q = new URLSearchParams({ pod, follow: followLog ? '1' : '0', previous: previous ? '1' : '0' });
  if (grep) q.set('grep', grep);
  try {
    const resp = await fetch('/api/trainjobs/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name) + '/log?' + q, { signal: abort.signal });
    if (!resp.ok) {
      const body = await resp.json().catch(() => ({ error: resp.statusText }));
      out.replaceChildren(errorBox(body));
      return;
    }
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      out.append(dec.decode(value, { stream: true }));
      if (atEnd) out.scrollTop = out.scrollHeight;
    }
  } catch (e) {
    if (e.name !== 'AbortError') out.append('\n' + e.message);
  }
}

// ---- Actions (only with --allow-writes) ----

function actionButton(namespace, name, action, label) {
  const b = el('button', { class: 'action', 'data-action': action }, label);
  b.addEventListener('click', async () => {
    const result = document.getElementById('action-result');
    try {
      const r = await api('POST', '/api/trainjobs/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(name) + '/' + action);
      result.textContent = r.message;
    } catch (e) {
      result.replaceChildren(errorBox(e));
    }
  });
  return b;
}

// ---- GPUs ----

// GPUS_EVERY is how often the GPUs view reads the nodes again while it is shown.
const GPUS_EVERY = 10000;

function showGPUs() {
  const main = document.getElementById('main');
  if (state.source) state.source.close();
  state.source = null;
  stopLog();
  const yaml = el('textarea', { id: 'fit-yaml', rows: 14, spellcheck: 'false', 'aria-label': 'TrainJob YAML',
    placeholder: 'Paste a TrainJob (and its runtime, if the cluster has not got it) to see where it would fit now…' });
  const check = el('button', { id: 'fit-check' }, 'Where would it fit now?');
  check.addEventListener('click', () => checkFit(yaml.value));
  const refresh = el('button', { id: 'gpus-refresh' }, 'Refresh');
  refresh.addEventListener('click', loadGPUs);
  main.replaceChildren(
    el('nav', { class: 'crumbs' }, el('a', { href: '#/' }, 'TrainJobs'), ' / ', el('strong', {}, 'GPUs')),
    el('div', { class: 'toolbar' }, refresh, el('span', { id: 'gpus-count', class: 'muted' })),
    el('div', { id: 'gpus' }, el('p', { class: 'muted' }, 'Loading…')),
    section('Would it fit now?', yaml, el('div', { class: 'toolbar' }, check), el('div', { id: 'fit-result' })));
  loadGPUs();
  state.gpusTimer = setInterval(loadGPUs, GPUS_EVERY);
}

// loadGPUs draws every node's GPUs, free and used, and who holds them, as fit counts them.
async function loadGPUs() {
  const box = document.getElementById('gpus');
  if (!box) return;
  let d;
  try {
    d = await api('GET', '/api/gpus');
  } catch (e) {
    box.replaceChildren(errorBox(e));
    setLive('not read', false);
    return;
  }
  setLive('read ' + new Date().toLocaleTimeString(), true);
  const total = d.nodes.reduce((n, g) => n + g.allocatable + g.devices, 0);
  const free = d.nodes.reduce((n, g) => n + g.free + g.devices - g.devicesAllocated, 0);
  document.getElementById('gpus-count').textContent = d.nodes.length + ' nodes · ' + free + ' of ' + total + ' GPUs free';
  const rows = d.nodes.map((g) => {
    const held = el('td', { class: 'holders' }, (g.holders || []).map((h) => el('div', { class: 'holder' },
      h.trainJob ? el('a', { href: '#/trainjob/' + encodeURIComponent(h.namespace) + '/' + encodeURIComponent(h.trainJob) }, h.namespace + '/' + h.trainJob)
        : 'pod ' + h.namespace + '/' + h.pod,
      ' ', el('span', { class: 'muted' }, [h.gpus ? h.gpus + ' GPUs' : '', h.devices ? h.devices + ' DRA devices' : ''].filter(Boolean).join(', ')))));
    const notes = [g.cordoned ? 'cordoned' : '', ...(g.sick || []).map((x) => 'sick: ' + x)].filter(Boolean).join('; ');
    return el('tr', { 'data-node': g.node, class: g.sick ? 'sick' : null },
      el('td', {}, g.node), el('td', {}, g.product || '-'),
      el('td', {}, g.allocatable ? gpuBar(g.allocatable - g.free, g.allocatable, g.resource) : '-'),
      el('td', {}, g.devices ? gpuBar(g.devicesAllocated, g.devices, 'DRA devices') : '-'),
      held, el('td', { class: 'muted' }, notes));
  });
  box.replaceChildren(el('div', { class: 'scroll' }, el('table', { class: 'grid', id: 'gpu-nodes' },
    el('thead', {}, el('tr', {}, ['Node', 'GPU', 'Extended resource (used of all)', 'DRA devices (allocated of all)', 'Held by', 'Notes'].map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 6, class: 'muted' }, 'No nodes.'))))),
  ...(d.notes || []).map((n) => el('p', { class: 'muted' }, 'Note: ', n)));
  sizeBars(box);
}

// gpuBar is used of total GPUs, a bar of the share used, and how many are free.
function gpuBar(used, total, what) {
  return el('span', { class: 'progress', title: used + ' of ' + total + ' ' + what + ' used', 'data-used': used, 'data-total': total },
    el('span', { class: 'bar', 'data-pct': Math.round(100 * used / total) }), el('span', { class: 'pct' }, (total - used) + ' of ' + total + ' free'));
}

// checkFit asks where the pasted TrainJob would fit now, as fit -f says it.
async function checkFit(text) {
  const out = document.getElementById('fit-result');
  out.replaceChildren(el('p', { class: 'muted' }, 'Placing…'));
  let r;
  try {
    r = await api('POST', '/api/fit', text);
  } catch (e) {
    out.replaceChildren(errorBox(e));
    return;
  }
  const f = r.fit;
  const requests = (l) => Object.entries(l || {}).map(([k, v]) => v + ' ' + k).join(', ') || '-';
  out.replaceChildren(
    el('p', { id: 'fit-verdict', class: 'verdict verdict-' + f.verdict, 'data-verdict': f.verdict }, f.message + '.'),
    table(['Replicated job', 'Pods', 'Fit now', 'Requests per pod', 'Nodes'], (f.replicatedJobs || []).map((j) =>
      [j.name, j.pods, j.fitNow, requests(j.requestsPerPod), [...new Set((j.placements || []).map((p) => p.node))].join(', ') || '-']), 'fit-jobs'),
    ...(f.replicatedJobs || []).flatMap((j) => (j.blocked || []).map((b) => el('p', { class: 'blocked' }, j.name + ': ' + b.message))),
    // replaceChildren writes a null as the text "null": no topology request draws nothing.
    ...(f.topology ? [el('p', {}, f.topology.message)] : []),
    ...(f.notes || []).map((n) => el('p', { class: 'muted' }, 'Note: ', n)),
    ...(r.warnings || []).map((w) => el('p', { class: 'muted' }, 'Warning: ', w)));
}

// ---- Actions: delete and rerun ----

// trainJobPath is the API's path of the TrainJob, with more after it.
function trainJobPath(namespace, name, ...more) {
  return ['/api/trainjobs', encodeURIComponent(namespace), encodeURIComponent(name), ...more].join('/');
}

// dialog opens a modal dialog of id with children, outside the view the pushes draw again; it is removed when
// closed.
function dialog(id, title, ...children) {
  const old = document.getElementById(id);
  if (old) old.remove();
  const d = el('dialog', { id, class: 'card' }, el('h2', {}, title), ...children, el('div', { class: 'dialog-error' }));
  d.addEventListener('close', () => d.remove());
  document.body.append(d);
  d.showModal();
  return d;
}

function cancelButton(d) {
  const b = el('button', { type: 'button', 'data-action': 'cancel' }, 'Cancel');
  b.addEventListener('click', () => d.close());
  return b;
}

// deleteButton asks the server what `delete` lists before it asks (the TrainJob, its stage and what it owns),
// shows it, and deletes that TrainJob (its uid) once confirmed.
function deleteButton(namespace, name) {
  const b = el('button', { class: 'action danger', 'data-action': 'delete' }, 'Delete…');
  b.addEventListener('click', async () => {
    let l;
    try {
      l = await api('GET', trainJobPath(namespace, name, 'delete'));
    } catch (e) {
      document.getElementById('action-result').replaceChildren(errorBox(e));
      return;
    }
    const confirm = el('button', { class: 'action danger', 'data-action': 'confirm-delete' }, 'Delete');
    const d = dialog('confirm-delete', 'Delete ' + name + '?', el('pre', { class: 'listing' }, l.listing), el('div', { class: 'toolbar' }, confirm));
    d.querySelector('.toolbar').append(cancelButton(d));
    confirm.addEventListener('click', async () => {
      try {
        const r = await api('POST', trainJobPath(namespace, name, 'delete') + '?uid=' + encodeURIComponent(l.uid));
        d.close();
        state.notice = r.message;
        location.hash = '#/';
      } catch (e) {
        d.querySelector('.dialog-error').replaceChildren(errorBox(e));
      }
    });
  });
  return b;
}

// rerunButton offers rerun's NEW and --set changes, and opens the copy it creates.
function rerunButton(namespace, name) {
  const b = el('button', { class: 'action', 'data-action': 'rerun' }, 'Rerun…');
  b.addEventListener('click', () => {
    const newName = el('input', { type: 'text', id: 'rerun-name', placeholder: name + '-rerun-N', 'aria-label': 'New name' });
    const sets = el('textarea', { id: 'rerun-set', rows: 4, placeholder: 'nodes=4\nimage=ghcr.io/example/llama-ft:1.1\nenv=EPOCHS=10',
      'aria-label': '--set changes' });
    const go = el('button', { class: 'action', 'data-action': 'confirm-rerun' }, 'Rerun');
    const d = dialog('rerun', 'Rerun ' + name,
      el('p', { class: 'muted' }, 'A copy of ', name, ' as its creator wrote it, changed as create\'s flags would (one FLAG=VALUE a line).'),
      el('label', {}, 'Name ', newName), el('label', {}, '--set', sets), el('div', { class: 'toolbar' }, go));
    d.querySelector('.toolbar').append(cancelButton(d));
    go.addEventListener('click', async () => {
      const body = { name: newName.value.trim(), set: sets.value.split('\n').map((l) => l.trim()).filter((l) => l) };
      try {
        const r = await api('POST', trainJobPath(namespace, name, 'rerun'), body);
        d.close();
        state.notice = r.message;
        location.hash = '#/trainjob/' + encodeURIComponent(namespace) + '/' + encodeURIComponent(r.name);
      } catch (e) {
        d.querySelector('.dialog-error').replaceChildren(errorBox(e));
      }
    });
  });
  return b;
}

// ---- Routing ----

function route() {
  clearInterval(state.gpusTimer);
  const m = location.hash.match(/^#\/trainjob\/([^/]+)\/([^/]+)$/);
  if (m) showTrainJob(decodeURIComponent(m[1]), decodeURIComponent(m[2]));
  else if (location.hash === '#/gpus') showGPUs();
  else showList();
  if (state.notice) {
    document.getElementById('main').prepend(el('p', { id: 'notice', class: 'notice', role: 'status' }, state.notice));
    state.notice = '';
  }
}

async function start() {
  try {
    state.config = await api('GET', '/api/config');
  } catch (e) {
    document.getElementById('main').replaceChildren(errorBox(e));
    return;
  }
  document.getElementById('scope').textContent = state.config.namespace ? 'namespace ' + state.config.namespace : 'every namespace';
  if (!state.config.allowWrites) document.getElementById('scope').append(' · read-only');
  window.addEventListener('hashchange', route);
  route();
}

start();
