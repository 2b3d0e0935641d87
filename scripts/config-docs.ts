/**
 * Writes docs/configuration.md from the configuration schema (src/config.ts) and the meaning of
 * each variable beside it (VARIABLE_DOCS): `npm run docs:config`. The default and the accepted
 * values are read from the schema, so the page cannot disagree with what the server does;
 * test/docs/configuration-docs.test.ts fails when the committed page differs from this output.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { z } from 'zod';
import { environmentVariables, SECTIONS, VARIABLE_DOCS, type VariableDoc } from '../src/config.js';

export const CONFIGURATION_PAGE = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));

/** The parts of zod's internal definitions read here (zod 4's `_zod.def`). */
interface Definition {
  type: string;
  innerType?: Schema;
  in?: Schema;
  defaultValue?: unknown;
  checks?: Schema[];
  check?: string;
  format?: string;
  value?: number;
  inclusive?: boolean;
  minimum?: number;
  maximum?: number;
  protocol?: RegExp;
  entries?: Record<string, string>;
}
interface Schema {
  _zod: { def: Definition };
}

/** Down to the type the value is parsed as, noting the default and whether the variable may be unset. */
function unwrap(schema: z.ZodType): { base: Schema; fallback: unknown; optional: boolean } {
  let current = schema as unknown as Schema;
  let fallback: unknown;
  let optional = false;
  for (;;) {
    const def = current._zod.def;
    if (def.type === 'pipe') current = def.in!;
    else if (def.type === 'default') {
      fallback = def.defaultValue;
      current = def.innerType!;
    } else if (def.type === 'optional') {
      optional = true;
      current = def.innerType!;
    } else return { base: current, fallback, optional };
  }
}

const code = (text: string | number) => `\`${text}\``;

/** The schemes a protocol pattern of config.ts allows: /^https?$/ is http and https. */
function schemes(protocol: RegExp): string[] {
  const body = protocol.source.replace(/^\^|\$$/g, '');
  const group = /^(\w+)\((\w+)\)\?$/.exec(body) ?? /^(\w+)(\w)\?$/.exec(body);
  return group ? [group[1]!, group[1]! + group[2]!] : [body];
}

/** What the schema accepts, in a few words; refinements beyond these are said by the meaning. */
function accepted(base: Schema): string {
  const def = base._zod.def;
  const checks = (def.checks ?? []).map((check) => check._zod.def);
  if (def.type === 'enum') return Object.values(def.entries!).map(code).join(', ');
  if (def.type === 'number') {
    const integer = checks.some((check) => check.check === 'number_format' && check.format === 'safeint');
    let low: string | null = null;
    let high: string | null = null;
    for (const check of checks) {
      if (check.check === 'greater_than') low = check.inclusive ? `${check.value}` : integer ? `${check.value! + 1}` : `more than ${check.value}`;
      if (check.check === 'less_than') high = check.inclusive ? `${check.value}` : `less than ${check.value}`;
    }
    const what = integer ? 'integer' : 'number';
    if (low !== null && high !== null && !low.startsWith('more') && !high.startsWith('less')) return `${what}, ${low}-${high}`;
    return [what, low && (low.startsWith('more') ? low : `at least ${low}`), high && (high.startsWith('less') ? high : `at most ${high}`)]
      .filter(Boolean)
      .join(', ');
  }
  if (def.type === 'string') {
    const url = def.format === 'url' ? def : checks.find((check) => check.check === 'string_format' && check.format === 'url');
    if (url)
      return `URL: ${schemes(url.protocol!)
        .map((scheme) => code(`${scheme}://`))
        .join(', ')}`;
    const min = checks.find((check) => check.check === 'min_length')?.minimum;
    const max = checks.find((check) => check.check === 'max_length')?.maximum;
    if (min !== undefined && max !== undefined) return `text, ${min}-${max} characters`;
    if (min !== undefined && min > 1) return `text, at least ${min} characters`;
    return 'text';
  }
  return def.type;
}

function defaultText(doc: VariableDoc, fallback: unknown, optional: boolean): string {
  if (doc.default !== undefined) return doc.default;
  if (fallback !== undefined) return code(String(fallback));
  return optional ? 'unset' : 'required';
}

const escapeCell = (text: string) => text.replace(/\|/g, '\\|');

export function renderConfigurationPage(): string {
  const shape = environmentVariables.shape;
  const names = Object.keys(VARIABLE_DOCS) as (keyof typeof VARIABLE_DOCS)[];
  const lines = [
    '# Configuration',
    '',
    '<!-- Written by `npm run docs:config` from src/config.ts (the schema and VARIABLE_DOCS); edit that, not this page. -->',
    '',
    'Every environment variable the server and the CLI read, with its default, the values it accepts',
    'and what it does. All configuration is environment variables, checked at start: a value out of',
    'range, or a combination that cannot work, stops the process with one line naming the variable.',
    'An empty variable counts as unset. Times are in seconds unless the name says otherwise. Rate',
    'limits are `MAX/SECONDS` (for example `5/60`) or `off`.',
  ];
  for (const [section, title] of Object.entries(SECTIONS)) {
    lines.push('', `## ${title}`, '', '| Variable | Default | Accepts | Meaning |', '|---|---|---|---|');
    for (const name of names.filter((n) => VARIABLE_DOCS[n].section === section)) {
      const doc: VariableDoc = VARIABLE_DOCS[name];
      const { base, fallback, optional } = unwrap(shape[name]);
      const accepts = name.startsWith('RATE_LIMIT_') && base._zod.def.type === 'string' ? '`MAX/SECONDS`, `off`' : accepted(base);
      lines.push(`| ${code(name)} | ${escapeCell(defaultText(doc, fallback, optional))} | ${escapeCell(accepts)} | ${escapeCell(doc.meaning)} |`);
    }
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(CONFIGURATION_PAGE, renderConfigurationPage());
  process.stdout.write(`wrote ${CONFIGURATION_PAGE}\n`);
}
