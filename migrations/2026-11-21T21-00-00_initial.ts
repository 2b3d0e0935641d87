import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE clients (
      client_id      text PRIMARY KEY,
      name           text NOT NULL,
      kind           text NOT NULL CHECK (kind IN ('tv', 'bot', 'web')),
      type           text NOT NULL CHECK (type IN ('public', 'confidential')),
      secret_hash    bytea,
      allowed_scopes text[] NOT NULL,
      created_at     timestamptz NOT NULL DEFAULT now(),
      disabled_at    timestamptz,
      CHECK ((type = 'confidential') = (secret_hash IS NOT NULL))
    );

    CREATE TABLE users (
      user_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      email         text NOT NULL UNIQUE,
      password_hash text NOT NULL,
      name          text,
      created_at    timestamptz NOT NULL DEFAULT now(),
      banned_at     timestamptz
    );

    -- Secrets every instance on this database must share (user code HMAC key, ...).
    CREATE TABLE server_secrets (
      name       text PRIMARY KEY,
      value      bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE signing_keys (
      kid         text PRIMARY KEY,
      alg         text NOT NULL,
      public_jwk  jsonb NOT NULL,
      private_jwk jsonb NOT NULL,
      created_at  timestamptz NOT NULL DEFAULT now(),
      retired_at  timestamptz
    );

    CREATE TABLE browser_sessions (
      session_hash bytea PRIMARY KEY,
      user_id      uuid REFERENCES users (user_id) ON DELETE CASCADE,
      csrf_secret  text NOT NULL,
      created_at   timestamptz NOT NULL,
      expires_at   timestamptz NOT NULL,
      auth_time    timestamptz
    );
    CREATE INDEX browser_sessions_expires_at ON browser_sessions (expires_at);

    CREATE TABLE device_links (
      link_id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      user_id              uuid NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
      client_id            text NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
      scopes               text[] NOT NULL,
      platform_name        text,
      platform_description text,
      platform_icon        text,
      auth_time            timestamptz NOT NULL,
      created_at           timestamptz NOT NULL,
      last_used_at         timestamptz NOT NULL,
      expires_at           timestamptz NOT NULL,
      revoked_at           timestamptz,
      revoked_reason       text
    );
    CREATE INDEX device_links_live_by_user ON device_links (user_id, client_id) WHERE revoked_at IS NULL;

    CREATE TABLE device_requests (
      request_id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      device_code_hash     bytea NOT NULL UNIQUE,
      user_code_hmac       bytea NOT NULL,
      client_id            text NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
      scopes               text[] NOT NULL,
      platform_name        text,
      platform_description text,
      platform_icon        text,
      phrase               text NOT NULL,
      phrase_choices       text[] NOT NULL,
      status               text NOT NULL DEFAULT 'pending'
                           CHECK (status IN ('pending', 'approved', 'denied', 'redeemed')),
      denied_reason        text CHECK (denied_reason IN ('user_denied', 'wrong_phrase', 'user_banned')),
      interval_seconds     integer NOT NULL,
      last_polled_at       timestamptz,
      created_at           timestamptz NOT NULL,
      expires_at           timestamptz NOT NULL,
      user_id              uuid REFERENCES users (user_id) ON DELETE CASCADE,
      auth_time            timestamptz,
      decided_at           timestamptz,
      link_id              uuid REFERENCES device_links (link_id) ON DELETE SET NULL
    );
    -- A user code names one request while it can still be entered.
    CREATE UNIQUE INDEX device_requests_live_user_code ON device_requests (user_code_hmac) WHERE status = 'pending';
    CREATE INDEX device_requests_user_code ON device_requests (user_code_hmac);
    CREATE INDEX device_requests_expires_at ON device_requests (expires_at);

    CREATE TABLE refresh_tokens (
      token_hash  bytea PRIMARY KEY,
      link_id     uuid NOT NULL REFERENCES device_links (link_id) ON DELETE CASCADE,
      created_at  timestamptz NOT NULL,
      expires_at  timestamptz NOT NULL,
      replaced_at timestamptz
    );
    CREATE INDEX refresh_tokens_link ON refresh_tokens (link_id);

    CREATE TABLE access_tokens (
      token_hash bytea PRIMARY KEY,
      link_id    uuid NOT NULL REFERENCES device_links (link_id) ON DELETE CASCADE,
      scopes     text[] NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL
    );
    CREATE INDEX access_tokens_link ON access_tokens (link_id);
    CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

    CREATE TABLE link_events (
      event_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      link_id    uuid NOT NULL REFERENCES device_links (link_id) ON DELETE CASCADE,
      user_id    uuid NOT NULL,
      client_id  text NOT NULL,
      event      text NOT NULL,
      reason     text,
      client_ip  text,
      created_at timestamptz NOT NULL
    );
    CREATE INDEX link_events_user ON link_events (user_id, created_at);
    CREATE INDEX link_events_link ON link_events (link_id);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE link_events, access_tokens, refresh_tokens, device_requests, device_links,
      browser_sessions, signing_keys, server_secrets, users, clients;
  `.execute(db);
}
