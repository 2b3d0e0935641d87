import { readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, resolve } from 'node:path';
import ts from 'typescript';

/**
 * The import graph of src/, read with the TypeScript parser the project already has (no regex to
 * be fooled by a comment, no new dependency): every static import and re-export, and every
 * dynamic import('...') with a literal path, between files of src/.
 */
export interface SourceImport {
  /** Both relative to src/, with forward slashes: 'oauth/dpop.ts'. */
  from: string;
  to: string;
  /** `import type`, `export type`, or every name imported marked `type`: erased at run time. */
  typeOnly: boolean;
}

export const root = resolve(import.meta.dirname, '../..');
export const sourceRoot = join(root, 'src');

export function sourceFiles(directory = sourceRoot): string[] {
  return readdirSync(directory, { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? sourceFiles(join(directory, entry.name)) : entry.name.endsWith('.ts') ? [join(directory, entry.name)] : []))
    .sort();
}

export function toSourcePath(file: string): string {
  return relative(sourceRoot, file).split('\\').join('/');
}

function isTypeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (!clause) return false; // import './side-effect.js'
  if (clause.isTypeOnly) return true;
  if (clause.name) return false;
  const bindings = clause.namedBindings;
  return bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((element) => element.isTypeOnly);
}

function isTypeOnlyExport(node: ts.ExportDeclaration): boolean {
  if (node.isTypeOnly) return true;
  const clause = node.exportClause;
  return clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((element) => element.isTypeOnly);
}

export function importsOf(file: string): SourceImport[] {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const found: Array<{ specifier: string; typeOnly: boolean }> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: isTypeOnlyImport(node) });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push({ specifier: node.moduleSpecifier.text, typeOnly: isTypeOnlyExport(node) });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [argument] = node.arguments;
      if (argument && ts.isStringLiteralLike(argument)) found.push({ specifier: argument.text, typeOnly: false });
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      // type X = import('./y.js').Z
      found.push({ specifier: node.argument.literal.text, typeOnly: true });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  const from = toSourcePath(file);
  return found
    .filter(({ specifier }) => specifier.startsWith('.'))
    .map(({ specifier, typeOnly }) => {
      const target = posix.normalize(posix.join(posix.dirname(from), specifier)).replace(/\.js$/, '.ts');
      return { from, to: target, typeOnly };
    })
    .filter(({ to }) => !to.startsWith('..'));
}

export function sourceImports(): SourceImport[] {
  return sourceFiles().flatMap(importsOf);
}

/**
 * The circles of a graph: one per strongly connected component of more than one file (or a file
 * importing itself), each shown as a concrete path from its first file (alphabetically) back to it.
 */
export function findCycles(edges: ReadonlyArray<Pick<SourceImport, 'from' | 'to'>>): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) {
    if (!next.has(from)) next.set(from, []);
    if (!next.has(to)) next.set(to, []);
    next.get(from)!.push(to);
  }
  // Tarjan's strongly connected components; the graph has a few hundred nodes, so recursion is fine.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  const connect = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const target of next.get(node)!) {
      if (!index.has(target)) {
        connect(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node)!, index.get(target)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || next.get(node)!.includes(node)) components.push(component.sort());
    }
  };
  for (const node of [...next.keys()].sort()) if (!index.has(node)) connect(node);
  return components.map((component) => {
    // The shortest way round from the first file back to it, inside its component.
    const inside = new Set(component);
    const start = component[0]!;
    const cameFrom = new Map<string, string>();
    const queue = [start];
    while (queue.length > 0) {
      const node = queue.shift()!;
      for (const target of next.get(node)!) {
        if (!inside.has(target) || cameFrom.has(target)) continue;
        cameFrom.set(target, node);
        if (target === start) queue.length = 0;
        else queue.push(target);
      }
    }
    const path = [start];
    for (let node = cameFrom.get(start)!; node !== start; node = cameFrom.get(node)!) path.splice(1, 0, node);
    return [...path, start];
  });
}

/** The room of a file: its top folder under src/, or the file itself at the top ('server.ts'). */
export const roomOf = (path: string): string => path.split('/')[0]!;
