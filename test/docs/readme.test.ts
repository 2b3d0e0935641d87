import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * Issue 30 §3: the README is for users and operators and stays short; its list of what the
 * server is built on names exactly what package.json installs, so it cannot go stale again.
 */

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

function section(title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start, `the README has a section "${title}"`).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end === -1 ? undefined : end);
}

/** The package names a text mentions as whole names (zod, not the zod of fastify-type-provider-zod). */
function named(text: string, names: string[]): string[] {
  return names.filter((name) => new RegExp(`(^|[^\\w@/-])${name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}($|[^\\w/-])`, 'i').test(text));
}

describe('the README', () => {
  it('is at most 400 lines', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(400);
  });

  it('says near the top that users exist only through the CLI or the admin API', () => {
    const top = readme.slice(0, readme.indexOf('\n## Two commands'));
    expect(top).toMatch(/no sign-up page/);
    expect(top).toMatch(/no password reset/);
    expect(top).toMatch(/no second factor/);
  });

  it('names every runtime dependency under "Built on", and every development package but type packages', () => {
    const builtOn = section('Built on');
    const [runtime, development] = builtOn.split('\nDevelopment:');
    const dependencies = Object.keys(pkg.dependencies);
    expect(named(runtime!, dependencies)).toEqual(dependencies);
    const devDependencies = Object.keys(pkg.devDependencies).filter((name) => !name.startsWith('@types/'));
    const mentioned = named(
      development!,
      devDependencies.map((name) => (name === 'typescript' ? 'TypeScript' : name)),
    );
    expect(mentioned.length).toBe(devDependencies.length);
  });

  it('links only to pages that exist, and so do the pages of docs/', () => {
    const docs = new URL('../../docs/', import.meta.url);
    const pages = [
      { from: new URL('../../README.md', import.meta.url), text: readme },
      ...readdirSync(docs)
        .filter((name) => name.endsWith('.md'))
        .map((name) => ({ from: new URL(name, docs), text: readFileSync(new URL(name, docs), 'utf8') })),
    ];
    const broken = pages.flatMap(({ from, text }) =>
      [...text.matchAll(/\]\(([^)#\s]+\.md)(#[^)]*)?\)/g)]
        .map((match) => match[1]!)
        .filter((target) => !/^[a-z]+:/.test(target) && !existsSync(new URL(target, from)))
        .map((target) => `${from.pathname.split('/').slice(-2).join('/')} -> ${target}`),
    );
    expect(broken).toEqual([]);
  });
});
