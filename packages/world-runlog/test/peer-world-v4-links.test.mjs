// `@workflow/world` is a peer dependency: installed into a workflow 4.8.9 app, the World
// loads that app's @workflow/world 4.5.0, which exports no AttributeValidationError. A named
// import of it fails to link there ("does not provide an export named"), and the app cannot
// load its World at all; src/errors.js reads it through a namespace import instead. This
// test lays the package out as npm installs it into such an app (the package's files, no
// node_modules of its own, the 4.x line's @workflow/* beside it, from
// examples/sdk-4.8.9/node_modules) and loads it in a child process.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, expect, test } from 'vitest';

import { addonPath } from '../src/native.js';

const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const V4_MODULES = path.resolve(PKG, '../../examples/sdk-4.8.9/node_modules');

let app;

beforeAll(() => {
  if (!fs.existsSync(path.join(V4_MODULES, '@workflow/world/package.json'))) {
    throw new Error(`${V4_MODULES} has no @workflow/world: run npm install in examples/sdk-4.8.9 (.ci/node.sh does)`);
  }
  app = fs.mkdtempSync(path.join(os.tmpdir(), 'runlog-peer-v4-'));
  const world = path.join(app, 'node_modules/world-runlog');
  const files = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8')).files;
  for (const f of [...files, 'package.json']) {
    if (fs.existsSync(path.join(PKG, f))) fs.cpSync(path.join(PKG, f), path.join(world, f), { recursive: true });
  }
  fs.mkdirSync(path.join(app, 'node_modules/@workflow'), { recursive: true });
  for (const name of ['world', 'world-local', 'errors', 'utils']) {
    const from = path.join(V4_MODULES, '@workflow', name);
    if (fs.existsSync(from)) fs.symlinkSync(from, path.join(app, 'node_modules/@workflow', name));
  }
  fs.writeFileSync(path.join(app, 'package.json'), '{"name":"v4-app","private":true,"type":"module"}\n');
});

afterAll(() => {
  if (app) fs.rmSync(app, { recursive: true, force: true });
});

function runInApp(code) {
  return execFileSync(process.execPath, ['--input-type=module', '-e', code], {
    cwd: app,
    env: { ...process.env, RUNLOG_NODE_ADDON: addonPath },
    encoding: 'utf8',
  });
}

test("the app's @workflow/world is 4.5.0, without AttributeValidationError (what this test is about)", () => {
  const out = runInApp(
    "import * as w from '@workflow/world'; import fs from 'node:fs';" +
      "const v = JSON.parse(fs.readFileSync('node_modules/@workflow/world/package.json', 'utf8')).version;" +
      "console.log(JSON.stringify({ v, has: 'AttributeValidationError' in w }));",
  );
  expect(JSON.parse(out)).toEqual({ v: '4.5.0', has: false });
});

test('the World loads against it, serves the 4.x line, and maps an attribute rejection to an error of that name', () => {
  const out = runInApp(
    "import { createWorld } from 'world-runlog';" +
      "import { toWorkflowError, AttributeValidationError } from './node_modules/world-runlog/src/errors.js';" +
      "import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path';" +
      "const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runlog-peer-v4-store-'));" +
      "const world = createWorld({ dataDir: dir });" +
      "const e = Object.assign(new Error('key too long'), { code: 'INVALID_INPUT', className: 'AttributeValidationError' });" +
      "const mapped = toWorkflowError(e);" +
      "console.log(JSON.stringify({ spec: world.specVersion, name: mapped.name, message: mapped.message, own: mapped instanceof AttributeValidationError, writeToStream: typeof world.writeToStream }));" +
      "await world.close?.(); fs.rmSync(dir, { recursive: true, force: true });",
  );
  expect(JSON.parse(out.trim().split('\n').at(-1))).toEqual({
    spec: 3,
    name: 'AttributeValidationError',
    message: 'key too long',
    own: true,
    writeToStream: 'function',
  });
});
