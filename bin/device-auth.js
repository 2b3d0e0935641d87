#!/usr/bin/env node
// A checkout runs the TypeScript source (so the CLI never lags behind an edit);
// the production image has no source and no tsx, only the compiled JavaScript.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
let tsImport = null;
if (existsSync(source)) {
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
