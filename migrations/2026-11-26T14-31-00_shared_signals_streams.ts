import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports only kysely and never changes once released.
// Plain SQL that PostgreSQL 15 and PGlite (PostgreSQL 17) both accept.

// Issue 32 §3: the Shared Signals transmitter (OpenID SSF 1.0).
//
// A stream belongs to one app (its receiver) and goes with it. Push streams (RFC 8935) name the
// receiver's endpoint and, if it asked, the Authorization header to send there, sealed under the
// key-encryption key like every other secret we must give back; poll streams (RFC 8936) name none
// (their endpoint is ours). Every subject is in a stream unless the receiver removed it
// (default_subjects "ALL"): ssf_excluded_subjects holds the removed users, kept after a user is
// deleted so that the deletion's own event is not sent about a user the receiver removed.
//
// ssf_sets holds each Security Event Token's claims, written when the event is fanned out (the
// user's email then is the one a receiver sees, even if the user is deleted before delivery) and
// signed when it is delivered, with the same jti every time. A poll stream's SETs stay until
// acknowledged; `position` orders them.
//
// clients.ssf_all_users is the operator's switch: the app's streams carry events about every user,
// not only about users who have (or had) a grant with the app.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE clients ADD COLUMN ssf_all_users boolean NOT NULL DEFAULT false;

    CREATE TABLE ssf_streams (
      stream_id        text PRIMARY KEY CHECK (stream_id ~ '^[A-Za-z0-9_-]{16,64}$'),
      client_id        text NOT NULL REFERENCES clients (client_id) ON DELETE CASCADE,
      delivery_method  text NOT NULL CHECK (delivery_method IN ('urn:ietf:rfc:8935', 'urn:ietf:rfc:8936')),
      endpoint_url     text CHECK (length(endpoint_url) <= 2048),
      authorization_header_sealed bytea CHECK (length(authorization_header_sealed) <= 4096),
      events_requested text[] CHECK (cardinality(events_requested) <= 64),
      description      text CHECK (length(description) <= 1024),
      subject_format   text NOT NULL DEFAULT 'iss_sub' CHECK (subject_format IN ('iss_sub', 'email', 'opaque', 'complex')),
      status           text NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'paused', 'disabled')),
      status_reason    text CHECK (length(status_reason) <= 1024),
      created_at       timestamptz NOT NULL,
      updated_at       timestamptz NOT NULL,
      verification_requested_at timestamptz,
      CHECK ((delivery_method = 'urn:ietf:rfc:8935') = (endpoint_url IS NOT NULL)),
      CHECK (authorization_header_sealed IS NULL OR delivery_method = 'urn:ietf:rfc:8935')
    );
    CREATE INDEX ssf_streams_client ON ssf_streams (client_id, created_at);

    CREATE TABLE ssf_excluded_subjects (
      stream_id text NOT NULL REFERENCES ssf_streams (stream_id) ON DELETE CASCADE,
      user_id   uuid NOT NULL,
      PRIMARY KEY (stream_id, user_id)
    );
    CREATE INDEX ssf_excluded_subjects_user ON ssf_excluded_subjects (user_id);

    CREATE TABLE ssf_sets (
      jti        text PRIMARY KEY CHECK (jti ~ '^[A-Za-z0-9_-]{16,64}$'),
      position   bigint GENERATED ALWAYS AS IDENTITY,
      stream_id  text NOT NULL REFERENCES ssf_streams (stream_id) ON DELETE CASCADE,
      event_id   bigint,
      claims     jsonb NOT NULL,
      created_at timestamptz NOT NULL
    );
    CREATE INDEX ssf_sets_stream ON ssf_sets (stream_id, position);
    CREATE INDEX ssf_sets_created_at ON ssf_sets (created_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE ssf_sets;
    DROP TABLE ssf_excluded_subjects;
    DROP TABLE ssf_streams;
    ALTER TABLE clients DROP COLUMN ssf_all_users;
  `.execute(db);
}
