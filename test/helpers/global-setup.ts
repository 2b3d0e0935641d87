import { randomBytes } from 'node:crypto';
import type { TestProject } from 'vitest/node';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { migrateToLatest } from '../../src/db/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string | null;
  }
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * Against PostgreSQL (TEST_DATABASE_URL) the schema is migrated once into a template database;
 * every test file then gets its own clone, dropped afterwards. The names are random so that
 * several runs on one server never meet.
 */
export default async function setup(project: TestProject) {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) {
    project.provide('templateDatabase', null);
    return;
  }
  const template = `device_auth_tpl_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${template}`);
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withDatabase(url, template), max: 1 }) }) });
  await migrateToLatest(db);
  await sql`SELECT 1`.execute(db);
  await db.destroy();
  project.provide('templateDatabase', template);

  return async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await admin.end();
  };
}
