/*
 * app.js: Rover's status page.  Reads the brain's JSON every 5 s and draws
 * the jobs, the selected job's speed (plans marked, reason on hover), its
 * datasets' progress (shards done, doing, left), node usage and plans, the cluster's utilisation over time and the dashboards'
 * waste.  Plots are uPlot (global uPlot, brain/web/vendor/).  window.rover
 * holds the plots and the selected job, for people poking in a console and
 * for tests/web/page_test.mjs.
 */
'use strict';

const rover = (window.rover = { plots: {}, selected: null, refreshes: 0, plans: [] });
const REFRESH_MS = 5000;

function $(sel) { return document.querySelector(sel); }

async function getJSON(path) {
  const r = await fetch(path, { headers: { Accept: 'application/json' } });
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

function fmt(v, digits) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (typeof v !== 'number') return String(v);
  return v.toLocaleString(undefined, { maximumFractionDigits: digits ?? 2 });
}

// MiB to GiB; a null (a gap in a series: the job was down) stays null.
function gib(m) { return m == null ? null : m / 1024; }

function fmtTime(t) {
  if (!t) return '–';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}

/* Replace tbody's rows with one per item; cells: [text, className] pairs or text. */
function fillTable(tbody, items, cells, onRow) {
  const rows = items.map((it) => {
    const tr = document.createElement('tr');
    for (const c of cells(it)) {
      const td = document.createElement('td');
      const [text, cls] = Array.isArray(c) ? c : [c, ''];
      td.textContent = text;
      if (cls) td.className = cls;
      tr.appendChild(td);
    }
    if (onRow) onRow(tr, it);
    return tr;
  });
  tbody.replaceChildren(...rows);
}

function plotWidth(el) { return Math.max(320, el.clientWidth || el.parentElement.clientWidth - 32); }

/* Create or update the uPlot in el; returns it. */
function plot(name, el, opts, data) {
  let u = rover.plots[name];
  if (u && u.series.length !== opts.series.length) {
    u.destroy();
    u = null;
  }
  if (!u) {
    opts.width = plotWidth(el);
    opts.height = 240;
    u = new uPlot(opts, data, el);
    rover.plots[name] = u;
  } else {
    u.setData(data);
  }
  return u;
}

/* ---- plan marks on the speed plot ---- */

function planTime(p, firstTs) {
  if (p.ts) return p.ts / 1000;
  return firstTs; /* a create plan: before any sample */
}

function drawPlanMarks(u) {
  const layer = u.over;
  layer.querySelectorAll('.plan-mark').forEach((m) => m.remove());
  const xs = u.data[0];
  if (!xs.length) return;
  for (const p of rover.plans) {
    const t = planTime(p, xs[0]);
    if (t === null || t === undefined) continue;
    const left = u.valToPos(t, 'x');
    if (left < 0 || left > u.over.clientWidth) continue;
    const m = document.createElement('div');
    m.className = 'plan-mark stage-' + p.stage;
    m.style.left = left + 'px';
    m.dataset.planId = p.id;
    m.setAttribute('aria-label', 'plan ' + p.id + ': ' + p.reason);
    const label = document.createElement('span');
    label.textContent = '#' + p.id;
    m.appendChild(label);
    m.addEventListener('mouseenter', (ev) => showTip(ev, p));
    m.addEventListener('mousemove', (ev) => moveTip(ev));
    m.addEventListener('mouseleave', hideTip);
    layer.appendChild(m);
  }
}

function showTip(ev, p) {
  const tip = $('#plan-tip');
  tip.textContent = 'plan #' + p.id + ' (' + p.stage + ', ' + p.algorithm + ', ' + p.outcome +
    '): ' + p.reason;
  tip.hidden = false;
  moveTip(ev);
}
function moveTip(ev) {
  const tip = $('#plan-tip');
  tip.style.left = ev.clientX + 12 + 'px';
  tip.style.top = ev.clientY + 12 + 'px';
}
function hideTip() { $('#plan-tip').hidden = true; }

/* ---- sections ---- */

async function refreshJobs() {
  const doc = await getJSON('/v1/jobs?limit=100');
  const jobs = doc.jobs || [];
  $('#jobs-empty').hidden = jobs.length > 0;
  if (!rover.selected && jobs.length) {
    const running = jobs.find((j) => j.status === 'running');
    rover.selected = (running || jobs[0]).uid;
  }
  fillTable($('#jobs tbody'), jobs, (j) => [
    j.name, j.namespace, j.user, [j.status, 'state-' + j.status],
    [fmt(j.speed, 1), 'num'], [fmt(j.workers, 0), 'num'], fmtTime(j.created_at),
  ], (tr, j) => {
    tr.dataset.uid = j.uid;
    if (j.uid === rover.selected) tr.classList.add('selected');
    tr.addEventListener('click', () => { rover.selected = j.uid; refresh(); });
  });
  return jobs;
}

async function refreshJob() {
  const uid = rover.selected;
  $('#job').hidden = !uid;
  if (!uid) return;
  const [job, series] = await Promise.all([
    getJSON('/v1/jobs/' + encodeURIComponent(uid)),
    getJSON('/v1/jobs/' + encodeURIComponent(uid) + '/series?max_points=2000'),
  ]);
  $('#job-name').textContent = job.namespace + '/' + job.name + ' (' + job.uid + ')';
  const st = $('#job-state');
  st.textContent = job.status;
  st.className = 'badge state-' + job.status;
  rover.plans = series.plans;

  const sp = series.speed;
  const speedData = [sp.ts.map((t) => t / 1000), sp.speed, sp.workers];
  plot('speed', $('#speed-plot'), {
    series: [{}, { label: 'samples/s', stroke: '#0969da', width: 2, scale: 'speed' },
      { label: 'workers', stroke: '#bf8700', scale: 'workers', paths: uPlot.paths.stepped({ align: 1 }) }],
    axes: [{}, { scale: 'speed', label: 'samples/s' },
      { scale: 'workers', side: 1, label: 'workers', grid: { show: false } }],
    scales: { workers: { range: (u, min, max) => [0, Math.max(1, max) + 1] } },
    hooks: { draw: [drawPlanMarks] },
  }, speedData);
  drawPlanMarks(rover.plots.speed);

  const us = series.usage;
  plot('usage', $('#usage-plot'), {
    series: [{}, { label: 'CPU used', stroke: '#1a7f37', width: 2, scale: 'cpu' },
      { label: 'CPU limit', stroke: '#1a7f37', dash: [6, 4], scale: 'cpu' },
      { label: 'memory used (GiB)', stroke: '#8250df', width: 2, scale: 'mem' },
      { label: 'memory limit (GiB)', stroke: '#8250df', dash: [6, 4], scale: 'mem' }],
    axes: [{}, { scale: 'cpu', label: 'cores' },
      { scale: 'mem', side: 1, label: 'GiB', grid: { show: false } }],
  }, [us.ts.map((t) => t / 1000), us.cpu, us.cpu_limit, us.memory_mb.map(gib), us.memory_limit_mb.map(gib)]);

  const progress = job.progress || [];
  $('#progress-empty').hidden = progress.length > 0;
  fillTable($('#progress tbody'), progress, (d) => [
    d.dataset + (d.finished ? ' (finished)' : ''), '',
    [d.shards_total > 0 ? fmt(d.shards_done, 0) + ' of ' + fmt(d.shards_total, 0) : '–', 'num'],
    [fmt(d.shards_doing, 0), 'num'], [d.shards_total > 0 ? fmt(d.shards_left, 0) : '–', 'num'],
    [fmt(d.samples_done, 0) + ' of ' + fmt(d.samples_total, 0), 'num'], [fmt(d.epoch, 0), 'num'],
    fmtTime(d.ts),
  ], (tr, d) => {
    // A stream has no shard count: its bar is of the samples known so far.
    const bar = document.createElement('progress');
    const [done, total] = d.shards_total > 0 ? [d.shards_done, d.shards_total]
      : [d.samples_done, d.samples_total];
    bar.max = Math.max(1, total);
    bar.value = done;
    bar.title = fmt(100 * done / Math.max(1, total), 1) + '%';
    tr.dataset.dataset = d.dataset;
    tr.children[1].appendChild(bar);
  });

  fillTable($('#nodes tbody'), job.nodes || [], (n) => [
    n.name, n.role, [fmt(n.rank, 0), 'num'], n.status + (n.exit_reason ? ' (' + n.exit_reason + ')' : ''),
    [fmt(n.cpu), 'num'], [fmt(n.peak_cpu), 'num'], [fmt(n.memory_mb, 0), 'num'],
    [fmt(n.peak_memory_mb, 0), 'num'], [fmt(n.relaunches, 0), 'num'], [fmt(n.oom_count, 0), 'num'],
  ]);
  fillTable($('#plans tbody'), series.plans.slice().reverse(), (p) => [
    [String(p.id), 'num'], p.stage, p.algorithm, p.reason, p.applied ? 'yes' : 'no',
    [p.outcome, 'outcome-' + p.outcome], [fmt(p.speed_before, 1), 'num'], [fmt(p.speed_after, 1), 'num'],
  ]);
}

async function refreshCluster() {
  const [c, nodes] = await Promise.all([
    getJSON('/v1/cluster/usage?window_s=21600&bucket_s=60'), getJSON('/v1/cluster')]);
  $('#cluster-nodes-empty').hidden = nodes.nodes.length > 0;
  fillTable($('#cluster-nodes tbody'), nodes.nodes, (n) => [
    n.name, n.ready ? 'yes' : 'no', [fmt(n.cpu_used), 'num'], [fmt(n.cpu), 'num'],
    [fmt(n.memory_used_mb, 0), 'num'], [fmt(n.memory_mb, 0), 'num'], [fmt(n.gpu, 0), 'num'],
    [n.gpu_util_pct == null ? '' : fmt(n.gpu_util_pct, 0), 'num'],
    fmtTime(n.ts),
  ]);
  $('#cluster-empty').hidden = c.ts.length > 0;
  const cap = c.capacity.cpu || null;
  plot('cluster', $('#cluster-plot'), {
    series: [{}, { label: 'CPU used', stroke: '#1a7f37', width: 2, scale: 'cpu' },
      { label: 'CPU allocated', stroke: '#0969da', width: 2, scale: 'cpu' },
      { label: 'CPU capacity', stroke: '#57606a', dash: [4, 4], scale: 'cpu' },
      { label: 'memory used (GiB)', stroke: '#8250df', scale: 'mem' },
      { label: 'memory allocated (GiB)', stroke: '#8250df', dash: [6, 4], scale: 'mem' }],
    axes: [{}, { scale: 'cpu', label: 'cores' },
      { scale: 'mem', side: 1, label: 'GiB', grid: { show: false } }],
  }, [c.ts.map((t) => t / 1000), c.cpu_used, c.cpu_alloc, c.ts.map(() => cap),
    c.memory_used_mb.map((m) => m / 1024), c.memory_alloc_mb.map((m) => m / 1024)]);
}

async function refreshDashboards() {
  const [waste, util, outcomes] = await Promise.all([
    getJSON('/v1/dashboards/overprovisioning?limit=50'),
    getJSON('/v1/dashboards/job_utilisation?limit=50'),
    getJSON('/v1/dashboards/plan_outcomes?limit=50'),
  ]);
  fillTable($('#waste tbody'), waste.rows, (r) => [
    r.name, r.user_name, r.role, [fmt(r.nodes, 0), 'num'], [fmt(r.cpu_alloc_per_node), 'num'],
    [fmt(r.cpu_p95_per_node), 'num'], [fmt(r.cpu_wasted), 'num'], [fmt(r.mem_alloc_mb_per_node, 0), 'num'],
    [fmt(r.mem_peak_mb_per_node, 0), 'num'], [fmt(r.mem_wasted_mb, 0), 'num'],
  ]);
  fillTable($('#utilisation tbody'), util.rows, (r) => [
    r.name, r.user_name, r.status, [fmt(r.cpu_used_avg), 'num'], [fmt(r.cpu_alloc_avg), 'num'],
    [fmt(r.cpu_util_pct, 1), 'num'], [fmt(r.mem_util_pct, 1), 'num'],
  ]);
  fillTable($('#outcomes tbody'), outcomes.rows, (r) => [
    r.algorithm, r.stage, [fmt(r.plans, 0), 'num'], [fmt(r.applied, 0), 'num'],
    [fmt(r.better, 0), 'num'], [fmt(r.neutral, 0), 'num'], [fmt(r.worse, 0), 'num'],
    [fmt(r.reverts, 0), 'num'], [fmt(r.mean_speed_ratio, 3), 'num'],
  ]);
}

async function refreshHealth() {
  const r = await fetch('/healthz');
  const h = await r.json();
  $('#health').textContent = 'brain ' + h.status + ' · database ' + (h.db === 'ok' ? 'ok' : h.db) +
    ' (' + h.db_mode + ')';
}

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    await refreshJobs();
    await Promise.all([refreshJob(), refreshCluster(), refreshDashboards(), refreshHealth()]);
    $('#updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    rover.refreshes++;
    document.body.dataset.refreshes = String(rover.refreshes);
  } catch (e) {
    /* The brain restarting or a database outage: say so, try again later. */
    $('#health').textContent = 'could not reach the brain: ' + e.message;
  } finally {
    busy = false;
  }
}

window.addEventListener('resize', () => {
  for (const [name, u] of Object.entries(rover.plots)) {
    const el = $('#' + name + '-plot');
    u.setSize({ width: plotWidth(el), height: 240 });
  }
});

refresh();
setInterval(refresh, REFRESH_MS);
