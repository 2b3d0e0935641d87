/**
 * Where a server's CPU goes, from a V8 `.cpuprofile` (`node --cpu-prof`): the samples by self time
 * in categories — (idle), (program), (garbage collector), our code (dist/src), each node_modules
 * package, node internals (node:*), native code and V8 built-ins — and again with the node and
 * native work charged to the package or our code that called it; the top functions by self time;
 * our own functions by inclusive time (their callees counted in).
 *
 * `npm run bench -- --profile` summarizes each scenario's profile with it. Alone:
 *
 *   node --import tsx test/bench/profile-summary.ts file.cpuprofile...
 *
 * prints the markdown of each file. When `<name>.window.json` lies beside `<name>.cpuprofile`
 * (the bench writes one: `{ "fromUs": …, "toUs": … }`), only the samples of that window count,
 * the scenario's measured window; otherwise the whole profile does, start-up included.
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The V8 CPU profile format, as far as it is read here. */
export interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
    children?: number[];
  }>;
  /** Microseconds of the machine's monotonic clock: process.hrtime() of any process reads the same clock. */
  startTime: number;
  endTime: number;
  /** Node id of each sample. */
  samples: number[];
  /** Microseconds from the previous sample (the first: from startTime). */
  timeDeltas: number[];
}

/** A span of the monotonic clock, in microseconds. */
export interface SampleWindow {
  fromUs: number;
  toUs: number;
}

export interface CategoryShare {
  category: string;
  samples: number;
  /** Of all the samples counted. */
  percentOfAll: number;
  /** Of the samples that were not idle; null for (idle) itself. */
  percentOfBusy: number | null;
  /** The same, node internals and native code charged to the nearest package or our code above them. */
  chargedPercentOfBusy: number | null;
}

export interface FunctionShare {
  function: string;
  /** file:line, shortened: package path, src/….ts through the source map, node:… */
  where: string;
  category: string;
  samples: number;
  percentOfBusy: number;
  /** Node internals and native code: the package or our function nearest above it, most often, and how often. */
  onBehalfOf: { function: string; where: string; percentOfFunction: number } | null;
}

export interface ProfileSummary {
  scenario: string;
  file: string;
  /** The samples counted were those of this window; null: the whole profile. */
  window: SampleWindow | null;
  samples: number;
  seconds: number;
  busySamples: number;
  /** By self time, largest first. */
  categories: CategoryShare[];
  /** By self time, largest first. */
  topSelf: FunctionShare[];
  /** Our functions (dist/src) by inclusive time: the samples in which they are anywhere on the stack. */
  ownInclusive: FunctionShare[];
  /**
   * The server's CPU in the same window from /proc (share of one core), when the bench knows it.
   * V8 samples by the clock: time the process was ready but off its core counts as busy.
   */
  processCpu?: number | null;
}

const IDLE = '(idle)';
export const OWN = 'our code (dist/src)';
const NODE = 'node internals (node:*)';
const NATIVE = 'native and V8 built-ins';
const TOP_SELF = 15;
const TOP_INCLUSIVE = 10;

type CallFrame = CpuProfile['nodes'][number]['callFrame'];

/** The package of a path under node_modules: `fastify`, `@fastify/formbody`. */
function packageOf(url: string): string | null {
  const at = url.lastIndexOf('/node_modules/');
  if (at < 0) return null;
  const [first, second] = url.slice(at + '/node_modules/'.length).split('/');
  return first?.startsWith('@') ? `${first}/${second}` : (first ?? null);
}

export function categoryOf(frame: CallFrame): string {
  const { functionName, url } = frame;
  if (url === '' && functionName.startsWith('(') && functionName.endsWith(')')) return functionName;
  if (url === '') return NATIVE;
  if (url.startsWith('node:')) return NODE;
  const pkg = packageOf(url);
  if (pkg) return pkg;
  if (url.includes('/dist/src/')) return OWN;
  return 'other files';
}

const sourceMaps = new Map<string, SourceMap | null>();

/** dist/src/x.js:L as src/x.ts:L through the .js.map that tsc wrote beside it, when it is there. */
function originalOf(file: string, line: number, column: number): string | null {
  if (!sourceMaps.has(file)) {
    let map: SourceMap | null = null;
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')) as SourceMapPayload);
    } catch {
      // no map: the dist path will do
    }
    sourceMaps.set(file, map);
  }
  const entry = sourceMaps.get(file)?.findEntry(line, column);
  if (!entry || !('originalSource' in entry)) return null;
  const source = entry.originalSource.startsWith('file:') ? fileURLToPath(entry.originalSource) : path.resolve(path.dirname(file), entry.originalSource);
  const checkout = file.slice(0, file.lastIndexOf('/dist/src/'));
  return `${path.relative(checkout, source)}:${entry.originalLine + 1}`;
}

export function whereOf(frame: CallFrame): string {
  const { url, lineNumber, columnNumber } = frame;
  if (url === '') return '';
  const line = lineNumber + 1;
  if (url.startsWith('node:')) return `${url}:${line}`;
  const file = url.startsWith('file:') ? fileURLToPath(url) : url;
  const at = file.lastIndexOf('/node_modules/');
  if (at >= 0) return `${file.slice(at + '/node_modules/'.length)}:${line}`;
  const dist = file.lastIndexOf('/dist/src/');
  if (dist >= 0) return originalOf(file, lineNumber, columnNumber) ?? `${file.slice(dist + 1)}:${line}`;
  return `${path.basename(file)}:${line}`;
}

const nameOf = (frame: CallFrame) => frame.functionName || '(anonymous)';
const keyOf = (frame: CallFrame) => `${frame.functionName}\0${frame.url}\0${frame.lineNumber}\0${frame.columnNumber}`;
const percent = (part: number, whole: number) => (whole > 0 ? (100 * part) / whole : 0);

/** Node internals and native code run for whoever called them. */
const BORROWED = new Set([NODE, NATIVE]);

export function summarizeProfile(profile: CpuProfile, scenario: string, file: string, window: SampleWindow | null): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const frameOf = (id: number) => byId.get(id)!.callFrame;
  const stackOf = function* (id: number) {
    for (let node: number | undefined = id; node !== undefined; node = parentOf.get(node)) yield frameOf(node);
  };
  /** The nearest frame at or above a node that is neither a node internal nor native code. */
  const ownerOf = (id: number) => {
    for (const frame of stackOf(id)) if (!BORROWED.has(categoryOf(frame)) && frame.functionName !== '(root)') return frame;
    return null;
  };

  // Self samples per node, within the window.
  const selfOf = new Map<number, number>();
  let at = profile.startTime;
  let first = Infinity;
  let last = -Infinity;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) continue;
    first = Math.min(first, at);
    last = Math.max(last, at);
    const id = profile.samples[i]!;
    selfOf.set(id, (selfOf.get(id) ?? 0) + 1);
  }

  let total = 0;
  let idle = 0;
  const categories = new Map<string, number>();
  const charged = new Map<string, number>();
  const count = <K>(into: Map<K, number>, key: K, samples: number) => into.set(key, (into.get(key) ?? 0) + samples);
  interface Tally {
    frame: CallFrame;
    samples: number;
    /** Node internals and native code: the frames they ran for. */
    owners: Map<string, Tally>;
  }
  const functions = new Map<string, Tally>();
  const inclusive = new Map<string, Tally>();
  const tally = (into: Map<string, Tally>, frame: CallFrame, samples: number) => {
    const key = keyOf(frame);
    const entry = into.get(key) ?? { frame, samples: 0, owners: new Map() };
    entry.samples += samples;
    into.set(key, entry);
    return entry;
  };
  for (const [id, samples] of selfOf) {
    const frame = frameOf(id);
    const category = categoryOf(frame);
    total += samples;
    count(categories, category, samples);
    if (category === IDLE) {
      idle += samples;
      continue;
    }
    const owner = BORROWED.has(category) ? ownerOf(id) : null;
    count(charged, owner ? categoryOf(owner) : category, samples);
    const entry = tally(functions, frame, samples);
    if (owner) tally(entry.owners, owner, samples);
    // Each of our functions once per stack, however deep it recurses.
    const seen = new Set<string>();
    for (const above of stackOf(id)) {
      if (categoryOf(above) !== OWN || seen.has(keyOf(above))) continue;
      seen.add(keyOf(above));
      tally(inclusive, above, samples);
    }
  }

  const busy = total - idle;
  const ranked = (from: Map<string, Tally>, n: number): FunctionShare[] =>
    [...from.values()]
      .sort((a, b) => b.samples - a.samples)
      .slice(0, n)
      .map(({ frame, samples, owners }) => {
        const owner = [...owners.values()].sort((a, b) => b.samples - a.samples)[0];
        return {
          function: nameOf(frame),
          where: whereOf(frame),
          category: categoryOf(frame),
          samples,
          percentOfBusy: percent(samples, busy),
          onBehalfOf: owner ? { function: nameOf(owner.frame), where: whereOf(owner.frame), percentOfFunction: percent(owner.samples, samples) } : null,
        };
      });
  const shares = new Set([...categories.keys(), ...charged.keys()]);
  return {
    scenario,
    file,
    window,
    samples: total,
    seconds: total > 1 ? (last - first) / 1e6 : 0,
    busySamples: busy,
    categories: [...shares]
      .map((category) => ({
        category,
        samples: categories.get(category) ?? 0,
        percentOfAll: percent(categories.get(category) ?? 0, total),
        percentOfBusy: category === IDLE ? null : percent(categories.get(category) ?? 0, busy),
        chargedPercentOfBusy: category === IDLE ? null : percent(charged.get(category) ?? 0, busy),
      }))
      .sort((a, b) => b.samples - a.samples),
    topSelf: ranked(functions, TOP_SELF),
    ownInclusive: ranked(inclusive, TOP_INCLUSIVE),
  };
}

/** `poll.cpuprofile` → `poll.window.json` */
export const windowFileOf = (profileFile: string) => `${profileFile.replace(/\.cpuprofile$/, '')}.window.json`;

/** Reads a profile and, when one lies beside it, its window. */
export function summarizeFile(file: string, displayName = file): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const windowFile = windowFileOf(file);
  const window = existsSync(windowFile) ? (JSON.parse(readFileSync(windowFile, 'utf8')) as SampleWindow) : null;
  return summarizeProfile(profile, path.basename(file).replace(/\.cpuprofile$/, ''), displayName, window);
}

// ---------------------------------------------------------------------------------------------
// Markdown.

const int = (n: number) => n.toLocaleString('en');
const pct = (n: number | null) => (n === null ? '' : n >= 9.95 ? `${n.toFixed(0)}%` : `${n.toFixed(1)}%`);
const cell = (text: string) => text.replace(/\|/g, '\\|');
/** Categories under this share of the busy samples share one row. */
const MINOR = 0.5;

export function renderProfileSummary(s: ProfileSummary): string {
  const span = s.window ? 'its measured window' : 'the whole profile, start-up included';
  const busy = percent(s.busySamples, s.samples);
  const lines = [
    `#### CPU profile: ${s.scenario}`,
    '',
    `\`${s.file}\`, ${span}: ${int(s.samples)} samples over ${s.seconds.toFixed(1)} s, ${pct(busy)} not idle (${int(s.busySamples)} samples).`,
  ];
  if (s.processCpu !== null && s.processCpu !== undefined) {
    const used = 100 * s.processCpu;
    lines.push(
      `The server used ${s.processCpu.toFixed(2)} of a core in the same window (/proc)${
        busy - used > 5
          ? `: about ${(busy - used).toFixed(0)} points of the ${pct(busy)} "not idle" are time it was ready to run but off its core (V8 samples by the clock), booked to the function it stood in`
          : ''
      }.`,
    );
  }
  lines.push('', '| category | samples | % of all | % of non-idle, self | % of non-idle, charged |', '|---|--:|--:|--:|--:|');
  const minor = s.categories.filter((c) => c.percentOfBusy !== null && Math.max(c.percentOfBusy, c.chargedPercentOfBusy ?? 0) < MINOR);
  for (const c of s.categories) {
    if (!minor.includes(c))
      lines.push(`| ${cell(c.category)} | ${int(c.samples)} | ${pct(c.percentOfAll)} | ${pct(c.percentOfBusy)} | ${pct(c.chargedPercentOfBusy)} |`);
  }
  if (minor.length > 0) {
    const sum = (of: (c: CategoryShare) => number | null) => minor.reduce((total, c) => total + (of(c) ?? 0), 0);
    lines.push(
      `| ${minor.length} more under ${MINOR}% each: ${cell(minor.map((c) => c.category).join(', '))} | ${int(sum((c) => c.samples))} | ${pct(sum((c) => c.percentOfAll))} | ${pct(sum((c) => c.percentOfBusy))} | ${pct(sum((c) => c.chargedPercentOfBusy))} |`,
    );
  }
  const behalf = (f: FunctionShare) => (f.onBehalfOf ? `${f.onBehalfOf.function} ${f.onBehalfOf.where} (${pct(f.onBehalfOf.percentOfFunction)})` : '');
  lines.push(
    '',
    `| top ${TOP_SELF} functions by self time | where | category | % of non-idle | node/native: mostly for |`,
    '|---|---|---|--:|---|',
    ...s.topSelf.map((f) => `| ${cell(f.function)} | ${cell(f.where)} | ${cell(f.category)} | ${pct(f.percentOfBusy)} | ${cell(behalf(f))} |`),
  );
  if (s.ownInclusive.length > 0) {
    lines.push(
      '',
      '| our functions by inclusive time (callees counted in) | where | % of non-idle |',
      '|---|---|--:|',
      ...s.ownInclusive.map((f) => `| ${cell(f.function)} | ${cell(f.where)} | ${pct(f.percentOfBusy)} |`),
    );
  }
  return lines.join('\n');
}

export function renderProfiles(summaries: ProfileSummary[]): string {
  return [
    '### CPU profiles (--profile)',
    '',
    'One fresh server per scenario under `node --cpu-prof` (a sample each millisecond), counted over the',
    "scenario's measured window; the server's figures above include the profiler's overhead. *Self*:",
    'the function on top of the stack; *charged*: node internals and native code counted for the',
    'nearest package or our code above them (what remains under them ran for no one else: the event',
    'loop, microtasks). (program) is native work V8 cannot place; an async function resumed after an',
    '`await` counts as itself.',
    ...summaries.map((s) => `\n${renderProfileSummary(s)}`),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const files = process.argv.slice(2);
  if (files.length === 0 || files.some((file) => file.startsWith('-'))) {
    process.stderr.write('usage: node --import tsx test/bench/profile-summary.ts file.cpuprofile...\n');
    process.exit(2);
  }
  process.stdout.write(`${files.map((file) => renderProfileSummary(summarizeFile(file))).join('\n\n')}\n`);
}
