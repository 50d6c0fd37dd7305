// Electron's layout: the package's JavaScript inside `resources/app.asar`, the files dlopen and mmap need (the
// addon, the default model) in its twin `resources/app.asar.unpacked` (electron-builder's asarUnpack). Without
// Electron both are plain folders here, which is exactly what the loader sees of the unpacked side; what it must do
// is pick the twin's binary, not the one inside the archive.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { resolveAddon } from '../../lib/native/addon-path.js';
import { unpackedPath } from '../../lib/package-root.js';
import { removeTempDirs, tempDir } from '../helpers/checkpoints.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TUPLE = `${process.platform}-${process.arch}`; // node-gyp-build's prebuilds/<platform>-<arch>

afterAll(removeTempDirs);

/** `<tmp>/resources/app.asar/node_modules/vtengine` and its unpacked twin, each with a package.json. */
function appLayout(): { packed: string; unpacked: string } {
  const resources = join(tempDir('vtengine-asar-'), 'resources');
  const packed = join(resources, 'app.asar/node_modules/vtengine');
  const unpacked = join(resources, 'app.asar.unpacked/node_modules/vtengine');
  for (const d of [packed, unpacked]) mkdirSync(d, { recursive: true });
  writeFileSync(join(packed, 'package.json'), JSON.stringify({ name: 'vtengine', version: '0.0.0' }));
  return { packed, unpacked };
}

function touch(path: string): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, '');
  return path;
}

describe('unpackedPath', () => {
  const all = () => true;
  it('maps a path inside any *.asar archive to its .asar.unpacked twin when the twin exists', () => {
    expect(unpackedPath('/opt/App/resources/app.asar/node_modules/vtengine', all)).toBe(
      '/opt/App/resources/app.asar.unpacked/node_modules/vtengine',
    );
    expect(unpackedPath('/opt/App/resources/other.asar/x', all)).toBe('/opt/App/resources/other.asar.unpacked/x');
  });
  it('leaves a path alone outside an archive, already unpacked, or without a twin', () => {
    expect(unpackedPath('/home/me/app/node_modules/vtengine', all)).toBe('/home/me/app/node_modules/vtengine');
    expect(unpackedPath('/r/app.asar.unpacked/node_modules/vtengine', all)).toBe('/r/app.asar.unpacked/node_modules/vtengine');
    expect(unpackedPath('/r/my.asarx/node_modules/vtengine', all)).toBe('/r/my.asarx/node_modules/vtengine');
    expect(unpackedPath('/r/app.asar/node_modules/vtengine', () => false)).toBe('/r/app.asar/node_modules/vtengine');
  });
});

describe('resolveAddon in an Electron app layout', () => {
  it('loads the prebuild from app.asar.unpacked, not from inside app.asar', () => {
    const { packed, unpacked } = appLayout();
    touch(join(packed, 'prebuilds', TUPLE, 'vtengine.napi.node')); // an archive that also holds one: not loadable
    const real = touch(join(unpacked, 'prebuilds', TUPLE, 'vtengine.napi.node'));
    expect(resolveAddon(packed)).toStrictEqual({ path: real, kind: 'prebuild' });
  });

  it('takes a local build that electron-rebuild left in the unpacked build/Release first, as node-gyp-build does', () => {
    const { packed, unpacked } = appLayout();
    touch(join(unpacked, 'prebuilds', TUPLE, 'vtengine.napi.node'));
    const built = touch(join(unpacked, 'build/Release/vtengine.node'));
    expect(resolveAddon(packed)).toStrictEqual({ path: built, kind: 'local build' });
  });

  it('falls back to the archive path when the binary was not unpacked (Electron then copies the file out itself)', () => {
    const { packed } = appLayout();
    const inside = touch(join(packed, 'prebuilds', TUPLE, 'vtengine.napi.node'));
    expect(resolveAddon(packed)).toStrictEqual({ path: inside, kind: 'prebuild' });
  });

  it("throws node-gyp-build's error when neither side has a binary for this platform", () => {
    const { packed, unpacked } = appLayout();
    touch(join(unpacked, 'prebuilds', 'win32-ia32', 'vtengine.napi.node'));
    expect(() => resolveAddon(packed)).toThrow(/No native build was found/);
  });
});

// The whole package as electron-builder lays it out with asarUnpack ["**/prebuilds/**", "**/models/default/**"]:
// dist/ and package.json in app.asar, the real addon (copied from this checkout's build) and the default model in
// app.asar.unpacked. A fresh Node process imports the package from inside "app.asar" and must load the addon and
// the model from the unpacked side.
describe('the package imported from app.asar', () => {
  const built = join(ROOT, 'build/Release/vtengine.node');
  const ready = existsSync(join(ROOT, 'dist/index.js')) && existsSync(built);

  it.skipIf(!ready)('loads the unpacked prebuild and the unpacked default model', () => {
    const { packed, unpacked } = appLayout();
    cpSync(join(ROOT, 'dist'), join(packed, 'dist'), { recursive: true });
    writeFileSync(join(packed, 'package.json'), readFileSync(join(ROOT, 'package.json')));
    const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    for (const dep of Object.keys(manifest.dependencies)) {
      const at = join(packed, '..', dep); // app.asar/node_modules/<dep>, next to vtengine
      mkdirSync(dirname(at), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules', dep), at);
    }
    const prebuild = join(unpacked, 'prebuilds', TUPLE, 'vtengine.napi.node');
    mkdirSync(dirname(prebuild), { recursive: true });
    cpSync(built, prebuild);
    mkdirSync(join(unpacked, 'models'), { recursive: true });
    symlinkSync(join(ROOT, 'models/default'), join(unpacked, 'models/default'));

    const script = `
      const { Engine, DEFAULT_MODEL_DIR } = await import(${JSON.stringify(join(packed, 'dist/index.js'))});
      const info = Engine.systemInfo();
      const engine = await Engine.load({ device: 'cpu' });
      const out = await engine.generate({ prompt: 'def fibonacci(n):' }, { maxTokens: 4, temperature: 0 });
      await engine.dispose();
      console.log(JSON.stringify({ binary: info.binary, model: DEFAULT_MODEL_DIR, tokens: out.usage.completionTokens }));
    `;
    const env = { ...process.env };
    delete env.VTENGINE_PREBUILD;
    const ran = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env });
    expect(ran.status, ran.stderr).toBe(0);
    const got = JSON.parse(ran.stdout.trim().split('\n').at(-1) as string) as {
      binary: { kind: string; path: string };
      model: string;
      tokens: number;
    };
    expect(got.binary).toStrictEqual({ kind: 'prebuild', path: prebuild });
    expect(got.model).toBe(join(unpacked, 'models/default'));
    expect(got.tokens).toBe(4);
  });
});
