// The replay's HTML page and Mermaid diagram, opened in headless Chromium
// the way an engineer would open them: the failure must be visible and
// named, an event's details must open on click, the page must load nothing
// from outside, and Mermaid itself must parse every scenario's diagram.
//
// Needs the release binary (`cargo build --release -p turnsim`, or
// TURNSIM_BIN) and Chromium at /usr/bin/chromium (or CHROMIUM). Screenshots
// go to target/browser/.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const turnsim = process.env.TURNSIM_BIN ?? path.join(root, 'target', 'release', 'turnsim');
const screenshots = path.join(root, 'target', 'browser');
const failing = ['scenarios/errored-sibling-completes-batch.yaml', '--seed', '0', '--regression', 'no-errored-sibling-rearm'];

let browser;
let scratch;

/** Runs `turnsim replay ARGS --format FORMAT`; returns its exit code and stdout. */
function replay(args, format) {
  const run = spawnSync(turnsim, ['replay', ...args, '--format', format], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  assert.equal(run.error, undefined, `cannot run ${turnsim}: ${run.error}`);
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

before(async () => {
  assert.ok(existsSync(turnsim), `no ${turnsim}: build it with \`cargo build --release -p turnsim\``);
  scratch = mkdtempSync(path.join(tmpdir(), 'turnsim-browser-'));
  mkdirSync(screenshots, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

after(async () => {
  await browser?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test('the HTML replay of a failing run shows the violation and each event on click', async () => {
  const { status, stdout } = replay(failing, 'html');
  assert.equal(status, 1, 'a failing replay exits 1');
  const file = path.join(scratch, 'replay.html');
  writeFileSync(file, stdout);
  const pageUrl = pathToFileURL(file).href;

  const page = await browser.newPage({ viewport: { width: 1500, height: 950 } });
  const requests = [];
  const errors = [];
  page.on('request', (request) => requests.push(request.url()));
  page.on('pageerror', (error) => errors.push(String(error)));
  page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
  await page.goto(pageUrl);

  const violation = page.locator('#violations li.violation').first();
  await violation.waitFor({ state: 'visible' });
  assert.match(await violation.innerText(), /^single-continuation: batch tc-read, tc-run is complete and a result opted in, but no continuation ran/);
  const check = violation.locator('.check');
  assert.equal(await check.evaluate((element) => getComputedStyle(element).color), 'rgb(207, 34, 46)', 'the check name is red');

  // The link jumps to the violating event, which is marked and shows its details.
  await violation.locator('a').click();
  const row = page.locator('tr.violating');
  assert.equal(await row.count(), 1);
  const onScreen = await row.evaluate((element) => {
    const box = element.getBoundingClientRect();
    const frame = document.getElementById('timeline-wrap').getBoundingClientRect();
    return box.top >= frame.top && box.bottom <= frame.bottom && box.bottom <= window.innerHeight;
  });
  assert.ok(onScreen, 'the violating event is on screen after the jump');
  assert.ok(await page.locator('#replay-command').isVisible(), 'the header stays in view');
  const headerTop = await page.locator('header').evaluate((element) => element.getBoundingClientRect().top);
  assert.equal(headerTop, 0, 'the page itself did not scroll');
  assert.equal(new URL(page.url()).hash, `#${await row.getAttribute('id')}`);
  assert.match(await row.innerText(), /tool\.applied tc-run output-error.*✗ single-continuation/s);
  const background = await row.evaluate((element) => getComputedStyle(element).backgroundColor);
  assert.equal(background, 'rgb(255, 215, 213)', 'the violating row is red');
  const shown = JSON.parse(await page.locator('#details-json').innerText());
  assert.equal(shown.kind, 'engine');
  await page.screenshot({ path: path.join(screenshots, 'replay-html.png') });

  // Clicking another event shows its own full JSON.
  await page.locator('#event-1').click();
  assert.equal(await page.locator('#details-number').innerText(), '1 at 0.000s');
  const first = JSON.parse(await page.locator('#details-json').innerText());
  assert.deepEqual(Object.keys(first).sort(), ['at_us', 'kind', 'lane', 'what']);
  assert.equal(first.kind, 'action');
  assert.ok(await page.locator('#event-1').evaluate((element) => element.classList.contains('selected')));

  // Lanes that took part are columns, in order; the rest are left out.
  const lanes = await page.locator('#timeline thead th').allInnerTexts();
  assert.deepEqual(lanes.map((lane) => lane.toLowerCase()), ['#', 'time', 'world', 'client', 'engine', 'model', 'store']);

  await page.locator('#transcript details summary').scrollIntoViewIfNeeded();
  assert.match(await page.locator('#transcript').innerText(), /Final stored transcript[\s\S]*m3 · assistant/);
  assert.match(await page.locator('#replay-command').innerText(), /replay scenarios\/errored-sibling-completes-batch\.yaml --seed 0 --regression no-errored-sibling-rearm$/);

  assert.deepEqual(requests, [pageUrl], 'the page loads nothing but itself');
  assert.deepEqual(errors, [], 'no script errors');
  await page.close();
});

test('Mermaid parses every scenario diagram and keeps the model labels whole', async () => {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.setContent('<!DOCTYPE html><html><body><div id="diagram"></div></body></html>');
  await page.addScriptTag({ path: path.join(here, 'node_modules', 'mermaid', 'dist', 'mermaid.min.js') });
  await page.evaluate(() => window.mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' }));

  const scenarios = readdirSync(path.join(root, 'scenarios')).filter((name) => name.endsWith('.yaml')).sort();
  assert.ok(scenarios.length > 10, `only ${scenarios.length} scenarios found`);
  for (const name of scenarios) {
    const { stdout } = replay([`scenarios/${name}`, '--seed', '0'], 'mermaid');
    const parsed = await page.evaluate(async (text) => {
      try {
        await window.mermaid.parse(text);
        return 'ok';
      } catch (error) {
        return String(error && error.message ? error.message : error);
      }
    }, stdout);
    assert.equal(parsed, 'ok', `scenarios/${name}: Mermaid rejects the diagram`);
  }

  const { stdout } = replay(failing, 'mermaid');
  const texts = await page.evaluate(async (text) => {
    const { svg } = await window.mermaid.render('replay-diagram', text);
    document.getElementById('diagram').innerHTML = svg;
    return [...document.querySelectorAll('#diagram text, #diagram .noteText')].map((node) => node.textContent);
  }, stdout);
  assert.ok(texts.includes('0.000s #1 r1 step=1'), 'the model call label is whole and unescaped');
  assert.ok(texts.includes('0.000s #1.1 tool-input-start tc-read read_file'), 'a chunk label is whole');
  assert.ok(
    texts.some((text) => text.startsWith('FAILED single-continuation: batch tc-read, tc-run is complete and a result opted in, but no continuation ran')),
    'the failure note is drawn',
  );
  const failureFill = await page.locator('#diagram rect.rect').first().getAttribute('fill');
  assert.match(failureFill ?? '', /rgb\(255, ?200, ?200\)/, 'the failure block is red');
  await page.locator('#diagram svg').screenshot({ path: path.join(screenshots, 'replay-mermaid.png') });
  await page.close();
});
