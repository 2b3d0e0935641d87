/**
 * The floors of the house, lowest first: a file may import from its own room or from a room on a
 * lower floor, never from a higher one, nor from another room on its own floor. Types count like
 * values (a type import upward is still an arrow upward), with one exception, `deps.ts` (below).
 * docs/architecture.md explains each room; test/architecture/import-graph.test.ts enforces this.
 *
 * A room is a folder of src/ ('oauth') or a file at its top ('server.ts').
 */
export const FLOORS: ReadonlyArray<{ name: string; rooms: readonly string[] }> = [
  { name: 'tools', rooms: ['lib'] },
  { name: 'configuration', rooms: ['config.ts'] },
  { name: 'stores and data', rooms: ['db', 'geo'] },
  // Below the SQL: a change's statement writes its event itself (the refresh rotation), with a name of the vocabulary.
  { name: 'event log', rooms: ['events'] },
  { name: 'SQL and words', rooms: ['repositories', 'i18n'] },
  { name: 'services', rooms: ['keys', 'rate-limits', 'housekeeping', 'delivery'] },
  { name: 'protocol', rooms: ['oauth'] },
  // Both call the protocol (accounts revokes grants and mints session tokens; apps names scopes
  // and grant types), which never calls them: accounts may call oauth, never the reverse. The
  // operator's webhooks stand beside them: registrations too, on the event log and the engine.
  { name: 'people and apps', rooms: ['accounts', 'apps', 'webhooks'] },
  // Issue 32 §3: the Shared Signals transmitter, which reads the protocol (app tokens, the signing
  // keys), people (email subjects), the event log and the delivery engine, and which nothing below calls.
  { name: 'shared signals', rooms: ['ssf'] },
  { name: 'http', rooms: ['http'] },
  { name: 'applications', rooms: ['app.ts', 'admin-app.ts'] },
  { name: 'wiring', rooms: ['compose.ts', 'admin-listeners.ts'] },
  { name: 'entry points', rooms: ['server.ts', 'cli'] },
];

/**
 * The type of the dependencies (`interface Deps` and its narrow picks). It stands beside the
 * floors rather than on one: every room from the protocol up takes a part of it, and it names the
 * services' types. It may therefore hold types only: every import in it and of it is type-only,
 * and no circle may pass through it (the graph test checks all three).
 */
export const DEPENDENCY_TYPE = 'deps.ts';

/** The lowest floor that takes the dependencies: below it a module is given what it needs by name (db, clock, ...). */
export const DEPENDENCY_TYPE_FROM_FLOOR = 'protocol';
