// page_test.mjs: rover-brain's status page in headless Chromium (Debian's
// /usr/bin/chromium, or $CHROMIUM), driven by playwright-core.
//   node tests/web/page_test.mjs BRAIN_URL JOB_UID POINTS SCREENSHOT
// The job was registered through REST and given POINTS speed samples just
// before.  Prints one "ok - ..." / "not ok - ..." line per check (the shell
// suite tests/scripts/check_web.sh counts them) and exits 1 when any failed.
import { chromium } from 'playwright-core';

const [url, uid, pointsArg, shot] = process.argv.slice(2);
const points = Number(pointsArg);
let failed = 0;
function check(what, cond, detail) {
  console.log((cond ? 'ok - ' : 'not ok - ') + what + (cond || !detail ? '' : ': ' + detail));
  if (!cond) failed = 1;
}

// CI runs as root, where Chromium refuses its sandbox.
const args = ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args,
  timeout: 60000,
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('requestfailed', (r) => problems.push('request failed: ' + r.url()));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(r.status() + ' ' + r.url()); });

  const resp = await page.goto(url + '/', { waitUntil: 'load', timeout: 30000 });
  check('GET / answers 200 text/html', resp.status() === 200 &&
    (resp.headers()['content-type'] || '').startsWith('text/html'),
    resp.status() + ' ' + resp.headers()['content-type']);
  // The first refresh is done once body carries data-refreshes.
  await page.waitForFunction(() => Number(document.body.dataset.refreshes || 0) >= 1,
    null, { timeout: 20000 });

  const row = page.locator(`#jobs tbody tr[data-uid="${uid}"]`);
  check('the jobs table shows the job registered a moment ago', (await row.count()) === 1);
  const rowText = (await row.count()) ? await row.innerText() : '';
  check('its row says running and its newest speed', /running/.test(rowText) && /\d/.test(rowText),
    JSON.stringify(rowText));

  await row.click();
  await page.waitForFunction((u) => window.rover.selected === u &&
    document.querySelector('#job-name').textContent.includes(u), uid, { timeout: 10000 });
  await page.waitForFunction((n) => {
    const u = window.rover.plots.speed;
    return u && u.data[1].filter((v) => v !== null).length === n;
  }, points, { timeout: 15000 }).catch(() => {});
  const plotted = await page.evaluate(() => {
    const u = window.rover.plots.speed;
    return u ? { xs: u.data[0].length, ys: u.data[1].filter((v) => v !== null) } : null;
  });
  check(`the speed plot has the ${points} reported points`, plotted && plotted.xs === points &&
    plotted.ys.length === points, JSON.stringify(plotted));
  check('the plotted speeds are the reported ones (first 100, step 3)',
    plotted && plotted.ys.every((v, i) => Math.abs(v - (100 + 3 * i)) < 1e-9),
    JSON.stringify(plotted && plotted.ys));
  const canvas = await page.locator('#speed-plot canvas').boundingBox();
  check('the speed plot is drawn on a canvas of real size', canvas && canvas.width > 300 &&
    canvas.height > 100, JSON.stringify(canvas));

  const marks = page.locator('#speed-plot .plan-mark');
  check('the create plan is marked on the speed plot', (await marks.count()) >= 1);
  if (await marks.count()) {
    await marks.first().hover();
    const tip = page.locator('#plan-tip');
    await tip.waitFor({ state: 'visible', timeout: 5000 }).catch(() => {});
    const text = (await tip.isVisible()) ? await tip.innerText() : '';
    check("hovering the mark shows the plan's reason", /plan #\d+ .*create.*: \S/.test(text),
      JSON.stringify(text));
  }
  check('the node usage plot has the points', await page.evaluate((n) => {
    const u = window.rover.plots.usage;
    return !!u && u.data[0].length === n;
  }, points));
  const prog = page.locator('#progress tbody tr[data-dataset="train"]');
  check("the job's dataset shows the master's progress",
    (await prog.count()) === 1 && /50 of 200/.test(await prog.innerText()) &&
    /146/.test(await prog.innerText()), (await prog.count()) ? await prog.innerText() : 'no row');
  check('its progress bar stands at 50 of 200 shards', await page.evaluate(() => {
    const b = document.querySelector('#progress tbody tr[data-dataset="train"] progress');
    return !!b && b.value === 50 && b.max === 200 && b.getBoundingClientRect().width > 0;
  }));
  check('the plans table lists the create plan',
    /create/.test(await page.locator('#plans tbody').innerText()));
  check('the cluster utilisation plot has points', await page.evaluate(() => {
    const u = window.rover.plots.cluster;
    return !!u && u.data[0].length >= 1 && u.data[1].some((v) => v > 0);
  }));
  check("the cluster nodes table shows the monitor's node-a",
    /node-a\s+yes/.test(await page.locator('#cluster-nodes tbody').innerText()));
  check("the node's GPUs and their utilisation show",
    /\s2\s+73\s/.test(await page.locator('#cluster-nodes tbody').innerText()));
  check('the cluster plot draws the capacity of 16 cores', await page.evaluate(() =>
    window.rover.plots.cluster.data[3].every((v) => v === 16)));
  const waste = await page.locator('#waste tbody').innerText();
  check('the waste table shows the job\'s unused allocation', /worker/.test(waste), waste);

  await page.screenshot({ path: shot, fullPage: true });
  check('a screenshot was kept at ' + shot, true);
  check('no console error, failed request or error status while loading', problems.length === 0,
    problems.join('; '));
} finally {
  await browser.close();
}
process.exit(failed);
