import type { Deps } from '../../deps.js';
import { KeyRevocationRefused, listKeyViews, revokeSigningKeyNow, type KeySchedule } from '../../keys/signing-keys.js';
import { adminActor, type AdminApp } from './types.js';
import { conflict, notFound } from './problem.js';
import { keySchedule, keyView, kidParam, page, problems } from './schemas.js';

const tags = ['signing keys'];

/**
 * The signing keys. A change is made in the database under the ring's lock, and this instance
 * reloads before answering; the others hear of it by announcement (within KEY_RELOAD_SECONDS without).
 */
export function adminKeyRoutes(app: AdminApp, deps: Deps): void {
  const scheduleView = async (schedule: KeySchedule) => {
    await deps.keys.reload();
    const now = deps.clock.now();
    return {
      active: schedule.active,
      next: schedule.next && { kid: schedule.next.kid, activates_at: schedule.next.activates_at?.toISOString() ?? null },
      keys: await listKeyViews(deps.db, now, deps.keys.policy),
    };
  };

  app.get(
    '/admin/keys',
    { schema: { tags, summary: 'Every signing key with its state and times, oldest first', response: { 200: page(keyView), ...problems } } },
    async () => ({ items: await listKeyViews(deps.db, deps.clock.now(), deps.keys.policy), next_after: null }),
  );

  app.post(
    '/admin/keys/rotate',
    {
      schema: {
        tags,
        summary:
          'Rotate now: the next key signs from as soon as every JWKS cache has seen it (JWKS_CACHE_SECONDS + 60 s after it was made), the active key retires then',
        response: { 200: keySchedule, ...problems },
      },
    },
    async (request) => {
      const schedule = await deps.keys.maintain(true, adminActor(request));
      request.audit = {
        action: 'keys.rotate',
        target: schedule.next?.kid ?? schedule.active,
        details: { activates_at: schedule.next?.activates_at?.toISOString() ?? null },
      };
      return scheduleView(schedule);
    },
  );

  app.post(
    '/admin/keys/:kid/revoke',
    {
      schema: {
        tags,
        summary: 'Emergency: the key leaves the JWKS and stops signing at once on every instance; if it was signing, the next key takes over now',
        params: kidParam,
        response: { 200: keySchedule, ...problems },
      },
    },
    async (request) => {
      const { kid } = request.params;
      let schedule: KeySchedule | null;
      try {
        schedule = await revokeSigningKeyNow(deps.db, deps.sealer, deps.clock.now(), deps.keys.policy, kid, adminActor(request));
      } catch (error) {
        if (error instanceof KeyRevocationRefused) throw conflict('only-signing-key', error.message);
        throw error;
      }
      if (schedule === null) throw notFound(`no signing key ${kid}: see GET /admin/keys`);
      request.audit = { action: 'keys.revoke', target: kid, details: { now_signing: schedule.active } };
      return scheduleView(schedule);
    },
  );
}
