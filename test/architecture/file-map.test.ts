import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, sourceRoot } from './source-imports.js';

/**
 * The file map of docs/architecture.md: the first fenced block after "## File map", an indented
 * tree (two spaces a level). A name ending in / is a folder; in /* a folder whose line speaks for
 * every file directly in it; anything else a file. The words after the name are its description.
 */
interface MapEntry {
  path: string;
  kind: 'file' | 'folder' | 'group';
  line: number;
}

function readFileMap(): MapEntry[] {
  const text = readFileSync(join(root, 'docs/architecture.md'), 'utf8').split('\n');
  const heading = text.findIndex((line) => line.trim() === '## File map');
  if (heading < 0) throw new Error('docs/architecture.md has no "## File map" section');
  const open = text.findIndex((line, index) => index > heading && line.startsWith('```'));
  const close = text.findIndex((line, index) => index > open && line.startsWith('```'));
  if (open < 0 || close < 0) throw new Error('the file map is not in a fenced block');
  const entries: MapEntry[] = [];
  const parents: string[] = [];
  for (let index = open + 1; index < close; index++) {
    const match = /^( *)(\S+)/.exec(text[index]!);
    if (!match) continue;
    const [, indent, name] = match as unknown as [string, string, string];
    if (indent.length % 2 !== 0) throw new Error(`file map line ${index + 1}: indent by two spaces a level`);
    const depth = indent.length / 2;
    if (depth > parents.length) throw new Error(`file map line ${index + 1}: indented under no folder`);
    parents.length = depth;
    const prefix = parents.join('');
    if (name.endsWith('/*')) {
      entries.push({ path: prefix + name.slice(0, -1), kind: 'group', line: index + 1 });
    } else if (name.endsWith('/')) {
      entries.push({ path: prefix + name, kind: 'folder', line: index + 1 });
      parents.push(name);
    } else {
      entries.push({ path: prefix + name, kind: 'file', line: index + 1 });
    }
  }
  return entries;
}

function walk(directory: string): { files: string[]; folders: string[] } {
  const files: string[] = [];
  const folders: string[] = [];
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      folders.push(`${relative(root, path)}/`);
      const inner = walk(path);
      files.push(...inner.files);
      folders.push(...inner.folders);
    } else {
      files.push(relative(root, path));
    }
  }
  return { files, folders };
}

const map = readFileMap();
const tree = walk(sourceRoot);

describe('the file map of docs/architecture.md', () => {
  it('is read as a tree: folders, groups and files, with src/ at its root', () => {
    expect(map.length).toBeGreaterThan(50);
    expect(map[0]).toMatchObject({ path: 'src/', kind: 'folder' });
    expect(map).toContainEqual(expect.objectContaining({ path: 'src/oauth/grant-types/', kind: 'group' }));
    expect(map).toContainEqual(expect.objectContaining({ path: 'src/oauth/dpop.ts', kind: 'file' }));
  });

  it('names only files and folders that exist', () => {
    const missing = map.filter(({ path, kind }) => {
      if (!existsSync(join(root, path))) return true;
      return statSync(join(root, path)).isDirectory() !== (kind !== 'file');
    });
    expect(missing.map(({ path, line }) => `line ${line}: ${path}`)).toEqual([]);
  });

  it('names every folder of src/', () => {
    const named = new Set(map.filter(({ kind }) => kind !== 'file').map(({ path }) => path));
    expect(['src/', ...tree.folders].filter((folder) => !named.has(folder))).toEqual([]);
  });

  it("covers every file of src/: by its own line, or by its folder's /* line", () => {
    const named = new Set(map.filter(({ kind }) => kind === 'file').map(({ path }) => path));
    const groups = map.filter(({ kind }) => kind === 'group').map(({ path }) => path);
    const uncovered = tree.files.filter(
      (file) => !named.has(file) && !groups.some((group) => file.startsWith(group) && !file.slice(group.length).includes('/')),
    );
    expect(uncovered).toEqual([]);
  });

  it('names each path once, and a folder it groups has no lines of its own', () => {
    const paths = map.map(({ path }) => path);
    expect(paths.filter((path, index) => paths.indexOf(path) !== index)).toEqual([]);
    const groups = map.filter(({ kind }) => kind === 'group').map(({ path }) => path);
    expect(map.filter(({ path, kind }) => kind === 'file' && groups.some((group) => path.startsWith(group))).map(({ path }) => path)).toEqual([]);
  });
});
