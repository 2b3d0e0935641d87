import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder holding package.json: src/ in a checkout and dist/src/ in a build sit at different
 * depths below it, and views/ lives there in both.
 */
function findProjectRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'views'))) return dir;
    dir = path.dirname(dir);
  }
  throw new Error('cannot find the project folder (package.json beside views/)');
}

export const projectRoot = findProjectRoot();
export const viewsFolder = path.join(projectRoot, 'views');

export function packageVersion(): string {
  return (JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string }).version;
}
