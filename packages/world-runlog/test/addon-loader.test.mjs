// The addon loader (src/native.js): the platform package by name, its directory beside the
// package, RUNLOG_NODE_ADDON, and the error naming the platform package when none is there.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, test } from 'vitest';

import { addonPath, addonSource, locateAddon, platformName, platformPackage } from '../src/native.js';
import { tempDir } from './helpers.mjs';

const pkgRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const here = platformName();
const { name: platformPkg, file: addonFile } = platformPackage(here);

let tmp;
afterEach(() => tmp?.cleanup());

/**
 * An app directory under `tmp` with `@runlog/world-runlog-<platform>` installed (its main a
 * stand-in file: locating resolves, it does not load).
 */
function appWithPlatformPackage() {
  tmp = tempDir('world-runlog-loader-');
  const app = path.join(tmp.dir, 'app');
  const pkgDir = path.join(app, 'node_modules', ...platformPkg.split('/'));
  mkdirSync(pkgDir, { recursive: true });
  writeFileSync(path.join(pkgDir, 'package.json'), JSON.stringify({ name: platformPkg, version: '0.1.0', main: addonFile }));
  writeFileSync(path.join(pkgDir, addonFile), 'not an addon');
  writeFileSync(path.join(app, 'package.json'), '{"name":"app","private":true}');
  return { app, pkgDir };
}

describe('platform names', () => {
  test('napi-rs names: linux gnu/musl, darwin, win32 msvc', () => {
    expect(platformName('linux', 'x64', false)).toBe('linux-x64-gnu');
    expect(platformName('linux', 'arm64', true)).toBe('linux-arm64-musl');
    expect(platformName('darwin', 'arm64', false)).toBe('darwin-arm64');
    expect(platformName('win32', 'x64', false)).toBe('win32-x64-msvc');
    expect(platformPackage('linux-x64-gnu')).toEqual({
      name: '@runlog/world-runlog-linux-x64-gnu',
      file: 'runlog_node.linux-x64-gnu.node',
    });
  });
});

describe('locateAddon', () => {
  test('this checkout loads the addon from its platform directory npm/<platform>/ (no variable needed)', () => {
    const env = { ...process.env };
    delete env.RUNLOG_NODE_ADDON;
    if (process.env.RUNLOG_NODE_ADDON) return; // an override run: the directory may be empty
    expect(locateAddon({ env })).toEqual({ path: path.join(pkgRoot, 'npm', here, addonFile), via: 'directory' });
    expect(addonPath).toBe(path.join(pkgRoot, 'npm', here, addonFile));
    expect(addonSource).toBe('directory');
  });

  test('the platform package is resolved by name from the module, as Node resolves an installed one', () => {
    const { app, pkgDir } = appWithPlatformPackage();
    const moduleUrl = pathToFileURL(path.join(app, 'node_modules', 'world-runlog', 'src', 'native.js')).href;
    expect(locateAddon({ env: {}, moduleUrl, cwd: tmp.dir })).toEqual({ path: path.join(pkgDir, addonFile), via: 'package' });
  });

  test('inlined into a bundle (Nitro dev and .output), the name resolves from the bundle inside the app', () => {
    const { app, pkgDir } = appWithPlatformPackage();
    for (const bundle of [['node_modules', '.nitro', 'dev', 'index.mjs'], ['.output', 'server', '_libs', 'world.mjs']]) {
      const moduleUrl = pathToFileURL(path.join(app, ...bundle)).href;
      expect(locateAddon({ env: {}, moduleUrl, cwd: app })).toEqual({ path: path.join(pkgDir, addonFile), via: 'package' });
    }
  });

  test('a bundle outside the app tree finds the package from the app (cwd)', () => {
    const { app, pkgDir } = appWithPlatformPackage();
    const moduleUrl = pathToFileURL(path.join(tmp.dir, 'elsewhere', 'server.mjs')).href;
    expect(locateAddon({ env: {}, moduleUrl, cwd: app })).toEqual({ path: path.join(pkgDir, addonFile), via: 'package' });
  });

  test('a directory install, bundled: the platform directory beside the real path of the app\'s world-runlog', () => {
    tmp = tempDir('world-runlog-loader-');
    const app = path.join(tmp.dir, 'app');
    mkdirSync(path.join(app, 'node_modules'), { recursive: true });
    writeFileSync(path.join(app, 'package.json'), '{"name":"app","private":true}');
    symlinkSync(pkgRoot, path.join(app, 'node_modules', 'world-runlog')); // what `npm install <dir>` makes
    const moduleUrl = pathToFileURL(path.join(app, '.output', 'server', 'index.mjs')).href;
    if (process.env.RUNLOG_NODE_ADDON) return;
    expect(locateAddon({ env: {}, moduleUrl, cwd: app })).toEqual({ path: path.join(pkgRoot, 'npm', here, addonFile), via: 'directory' });
  });

  test('a platform package installed without its .node file (packed before the build) is named as such', () => {
    const { app, pkgDir } = appWithPlatformPackage();
    rmSync(path.join(pkgDir, addonFile));
    let err;
    try {
      locateAddon({ env: {}, moduleUrl: pathToFileURL(path.join(tmp.dir, 'elsewhere.mjs')).href, cwd: app, platform: here });
    } catch (e) {
      err = e;
    }
    expect(err.code).toBe('ADDON_NOT_FOUND');
    expect(err.message).toContain(`the platform package ${platformPkg} is installed (${pkgDir}) without its ${addonFile}.`);
  });

  test('RUNLOG_NODE_ADDON overrides everything; naming no file is an error naming it', () => {
    expect(locateAddon({ env: { RUNLOG_NODE_ADDON: addonPath } })).toEqual({ path: addonPath, via: 'RUNLOG_NODE_ADDON' });
    const missing = path.join(pkgRoot, 'no-such-addon.node');
    let err;
    try {
      locateAddon({ env: { RUNLOG_NODE_ADDON: missing } });
    } catch (e) {
      err = e;
    }
    expect(err.code).toBe('ADDON_NOT_FOUND');
    expect(err.message).toContain(`RUNLOG_NODE_ADDON names no file: ${missing}`);
  });

  test('no addon for the platform: ADDON_NOT_FOUND naming the missing platform package and where it looked', () => {
    let err;
    try {
      locateAddon({ env: {}, platform: 'linux-riscv64-gnu' });
    } catch (e) {
      err = e;
    }
    expect(err.code).toBe('ADDON_NOT_FOUND');
    expect(err.platformPackage).toBe('@runlog/world-runlog-linux-riscv64-gnu');
    expect(err.message).toMatch(
      /^runlog addon not found: the platform package @runlog\/world-runlog-linux-riscv64-gnu is not installed\. /,
    );
    expect(err.message).toContain('npm install @runlog/world-runlog-linux-riscv64-gnu');
    expect(err.searched).toEqual([
      `@runlog/world-runlog-linux-riscv64-gnu from ${path.join(pkgRoot, 'src', 'native.js')}`,
      `@runlog/world-runlog-linux-riscv64-gnu from ${path.join(process.cwd(), 'package.json')}`,
      path.join(pkgRoot, 'npm', 'linux-riscv64-gnu', 'runlog_node.linux-riscv64-gnu.node'),
    ]);
  });
});

test('importing a copy of the package without its platform package fails at import, naming the package', () => {
  tmp = tempDir('world-runlog-loader-');
  const copy = path.join(tmp.dir, 'world-runlog');
  for (const entry of ['package.json', 'src']) cpSync(path.join(pkgRoot, entry), path.join(copy, entry), { recursive: true });
  const env = { ...process.env };
  delete env.RUNLOG_NODE_ADDON;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(path.join(copy, 'src', 'native.js')).href)})`], {
    cwd: tmp.dir,
    env,
    encoding: 'utf8',
  });
  expect(r.status).not.toBe(0);
  expect(r.stderr).toContain(`runlog addon not found: the platform package ${platformPkg} is not installed.`);
  expect(r.stderr).toContain("code: 'ADDON_NOT_FOUND'");
});

// What Turbopack (Next 16.4.6, `next dev` and `next build`) makes of native.js when an app's
// code imports world-runlog and it is bundled: `createRequire(import.meta.url)` is taken for
// the bundle's own require, and a call of it with a computed argument becomes this stub (as
// found in .next/dev/server/chunks/…js). examples/next.mjs checks the real thing (GET
// /api/addon); this replays the rewrite on a copy of the package installed in an app.
const TURBOPACK_TOO_DYNAMIC =
  '(() => { const e = new Error("Cannot find module as expression is too dynamic"); e.code = "MODULE_NOT_FOUND"; throw e; })()';

function asTurbopackBundles(source) {
  return source.replace(/createRequire\(\s*import\.meta\.url\s*\)\(([^()]*)\)/g, TURBOPACK_TOO_DYNAMIC);
}

test('bundled by Turbopack (createRequire(import.meta.url) rewritten), the loader still loads the installed platform package', () => {
  if (process.env.RUNLOG_NODE_ADDON) return;
  const { app, pkgDir } = appWithPlatformPackage();
  cpSync(addonPath, path.join(pkgDir, addonFile)); // the real addon this time: the copy must load
  const world = path.join(app, 'node_modules', 'world-runlog');
  for (const entry of ['package.json', 'src']) cpSync(path.join(pkgRoot, entry), path.join(world, entry), { recursive: true });
  const native = path.join(world, 'src', 'native.js');
  writeFileSync(native, asTurbopackBundles(readFileSync(native, 'utf8')));
  const env = { ...process.env };
  delete env.RUNLOG_NODE_ADDON;
  const r = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `const m = await import(${JSON.stringify(pathToFileURL(native).href)}); console.log(JSON.stringify([m.addonSource, m.addonPath, m.version()]))`],
    { cwd: app, env, encoding: 'utf8' },
  );
  expect(r.stderr).not.toContain('too dynamic');
  expect(r.status).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual(['package', path.join(pkgDir, addonFile), JSON.parse(readFileSync(path.join(pkgRoot, 'package.json'), 'utf8')).version]);
});

test('the Turbopack rewrite the test above replays does match the require a bundler takes for its own', () => {
  const rewritten = asTurbopackBundles('const addon = createRequire(import.meta.url)(located.path);');
  expect(rewritten).toBe(`const addon = ${TURBOPACK_TOO_DYNAMIC};`);
});
