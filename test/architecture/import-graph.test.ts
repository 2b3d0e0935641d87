import { describe, expect, it } from 'vitest';
import ts from 'typescript';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEPENDENCY_TYPE, DEPENDENCY_TYPE_FROM_FLOOR, FLOORS } from './floors.js';
import { findCycles, importsOf, roomOf, sourceFiles, sourceImports, sourceRoot, toSourcePath } from './source-imports.js';

// No database: the graph is read from the source files with the TypeScript parser.
const imports = sourceImports();
const floorOf = new Map(FLOORS.flatMap(({ rooms }, floor) => rooms.map((room) => [room, floor] as const)));
const describeImport = (i: { from: string; to: string; typeOnly: boolean }) => `${i.from} -> ${i.to}${i.typeOnly ? ' (type)' : ''}`;

describe('the import graph of src/', () => {
  it('the scanner sees static, type-only, re-exported and dynamic imports', () => {
    // A check of the checker on files whose imports are known, so that a parser change cannot empty the graph unnoticed.
    const cli = importsOf(join(sourceRoot, 'cli/main.ts'));
    expect(cli).toContainEqual({ from: 'cli/main.ts', to: 'db/connect.ts', typeOnly: false });
    const store = importsOf(join(sourceRoot, 'rate-limits/store.ts'));
    expect(store).toContainEqual({ from: 'rate-limits/store.ts', to: 'db/redis.ts', typeOnly: true });
    expect(store).toContainEqual({ from: 'rate-limits/store.ts', to: 'repositories/rate-limits.ts', typeOnly: false });
    expect(imports.length).toBeGreaterThan(300);
  });

  it('every import names a file that exists', () => {
    const files = new Set(sourceFiles().map(toSourcePath));
    expect(imports.filter((i) => !files.has(i.to)).map(describeImport)).toEqual([]);
  });

  it('has no circle, counting type-only imports', () => {
    expect(findCycles(imports).map((cycle) => cycle.join(' -> '))).toEqual([]);
  });

  it('every room of src/ stands on exactly one floor', () => {
    const rooms = [...new Set(sourceFiles().map((file) => roomOf(toSourcePath(file))))].filter((room) => room !== DEPENDENCY_TYPE);
    expect(rooms.filter((room) => !floorOf.has(room))).toEqual([]);
    const named = FLOORS.flatMap(({ rooms }) => rooms);
    expect(named.filter((room, index) => named.indexOf(room) !== index)).toEqual([]);
    expect(named.filter((room) => !rooms.includes(room))).toEqual([]);
  });

  it('no import runs up a floor or sideways into another room of the same floor', () => {
    const wrong = imports.filter(({ from, to }) => {
      const [a, b] = [roomOf(from), roomOf(to)];
      if (a === b || a === DEPENDENCY_TYPE || b === DEPENDENCY_TYPE) return false;
      return floorOf.get(a)! <= floorOf.get(b)!;
    });
    expect(wrong.map(describeImport)).toEqual([]);
  });

  it('finds a circle where there is one, type-only or not, and none in a graph without', () => {
    const circle = [
      { from: 'a.ts', to: 'b.ts' },
      { from: 'b.ts', to: 'c.ts' },
      { from: 'c.ts', to: 'a.ts' },
      { from: 'c.ts', to: 'd.ts' },
    ];
    expect(findCycles(circle)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
    expect(findCycles([{ from: 'a.ts', to: 'a.ts' }])).toEqual([['a.ts', 'a.ts']]);
    expect(findCycles(circle.slice(0, 2))).toEqual([]);
  });

  it('deps.ts is a type: it imports only types, exports no value, and every room takes it as a type', () => {
    expect(imports.filter((i) => (i.from === DEPENDENCY_TYPE || i.to === DEPENDENCY_TYPE) && !i.typeOnly).map(describeImport)).toEqual([]);
    const source = ts.createSourceFile(DEPENDENCY_TYPE, readFileSync(join(sourceRoot, DEPENDENCY_TYPE), 'utf8'), ts.ScriptTarget.ES2022);
    const declarations = source.statements.filter((s) => !ts.isImportDeclaration(s));
    expect(declarations.filter((s) => !ts.isInterfaceDeclaration(s) && !ts.isTypeAliasDeclaration(s)).map((s) => s.getText(source).slice(0, 80))).toEqual([]);
  });

  it(`only rooms from the ${DEPENDENCY_TYPE_FROM_FLOOR} floor up take deps.ts; below, a module is given what it needs by name`, () => {
    const lowest = FLOORS.findIndex(({ name }) => name === DEPENDENCY_TYPE_FROM_FLOOR);
    expect(lowest).toBeGreaterThan(0);
    expect(imports.filter((i) => i.to === DEPENDENCY_TYPE && floorOf.get(roomOf(i.from))! < lowest).map(describeImport)).toEqual([]);
  });

  it('lib/ imports nothing of ours outside lib/', () => {
    expect(imports.filter((i) => roomOf(i.from) === 'lib' && roomOf(i.to) !== 'lib').map(describeImport)).toEqual([]);
  });

  it("the protocol never calls the user's side or app registration (accounts and apps may call oauth, never the reverse)", () => {
    expect(imports.filter((i) => roomOf(i.from) === 'oauth' && ['accounts', 'apps'].includes(roomOf(i.to))).map(describeImport)).toEqual([]);
  });
});
