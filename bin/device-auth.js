#!/usr/bin/env node
// Runs the compiled JavaScript (dist/, `npm run build`) when it is there and current: no source
// file is newer than it. Otherwise, in a checkout, the TypeScript source through tsx, so that the
// CLI never lags behind an edit; compiling the source on every call costs about a second of CPU,
// which is why the build is preferred. The production image has only dist/.
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const built = path.join(root, 'dist/src/cli/main.js');
const source = path.join(root, 'src/cli/main.ts');

/** The newest modification time of the TypeScript files under `dir` (0 when there are none). */
function newestSource(dir) {
  let newest = 0;
  if (!existsSync(dir)) return newest;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile() && entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

// The build is incremental (tsc -b): it rewrites only the outputs whose source changed, so the
// entry point may be older than the last build. The build's record in dist/ is written by every
// build that had anything to do, and so tells when the outputs were last brought up to date.
const buildRecord = path.join(root, 'dist/tsconfig.build.tsbuildinfo');
const lastBuilt = (file) => (existsSync(file) ? statSync(file).mtimeMs : 0);
const builtIsCurrent =
  existsSync(built) &&
  Math.max(newestSource(path.join(root, 'src')), newestSource(path.join(root, 'migrations'))) <= Math.max(lastBuilt(built), lastBuilt(buildRecord));

let tsImport = null;
if (!builtIsCurrent && existsSync(source)) {
  try {
    ({ tsImport } = await import('tsx/esm/api'));
  } catch {
    tsImport = null;
  }
}
if (tsImport) {
  await tsImport(source, import.meta.url);
} else {
  await import('../dist/src/cli/main.js');
}
