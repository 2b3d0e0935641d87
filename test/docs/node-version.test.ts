import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/**
 * Issue 30 §3: the Node version the project states (package.json's engines, which the README
 * repeats) is one that every installed package accepts. npm only warns when a package wants a newer
 * Node (cookie@2 wanted 22 while the README said 20.19), so this fails instead.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
const oldestStated = semver.minVersion(pkg.engines.node)!;

interface Installed {
  name: string;
  version: string;
  engines?: { node?: unknown };
}

/** Every package under node_modules, nested ones included (a package may carry its own copies). */
function installedPackages(folder: string): Installed[] {
  if (!existsSync(folder)) return [];
  const found: Installed[] = [];
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || !(entry.isDirectory() || entry.isSymbolicLink())) continue;
    const at = path.join(folder, entry.name);
    if (entry.name.startsWith('@')) {
      found.push(...installedPackages(at));
      continue;
    }
    const manifest = path.join(at, 'package.json');
    if (existsSync(manifest)) found.push(JSON.parse(readFileSync(manifest, 'utf8')) as Installed);
    found.push(...installedPackages(path.join(at, 'node_modules')));
  }
  return found;
}

describe('the stated Node version', () => {
  it('is accepted by the engines field of every installed package', () => {
    const packages = installedPackages(path.join(root, 'node_modules'));
    expect(packages.length).toBeGreaterThan(100);
    const refusing = packages
      .filter((p) => typeof p.engines?.node === 'string' && !semver.satisfies(oldestStated, p.engines.node as string))
      .map((p) => `${p.name}@${p.version} wants node ${p.engines!.node as string}`);
    expect(refusing, `package.json says node ${pkg.engines.node}`).toEqual([]);
  });

  it('is the one the README states, and the image runs its major version', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme).toContain(`Node.js ${oldestStated.major}.${oldestStated.minor} or newer`);
    const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    const images = [...dockerfile.matchAll(/^FROM node:(\d+)/gm)].map((m) => Number(m[1]));
    expect(images.length).toBeGreaterThan(0);
    for (const major of images) expect(major).toBe(oldestStated.major);
  });

  it('is what this process runs at least, so the suite tests what it states', () => {
    expect(semver.gte(process.versions.node, oldestStated)).toBe(true);
  });
});
