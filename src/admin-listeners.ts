import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildAdminApp } from './admin-app.js';
import type { Deps } from './deps.js';

/** Whether something answers on the socket: a live server's socket is never taken over. */
function socketAnswers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
}

async function listenOnSocket(app: FastifyInstance, socketPath: string): Promise<void> {
  let exists = false;
  try {
    exists = lstatSync(socketPath).isSocket();
  } catch {
    // nothing there
  }
  if (exists) {
    if (await socketAnswers(socketPath)) throw new Error(`the admin socket ${socketPath} is in use by another server`);
    // Left by a process that crashed: nobody listens on it any more.
    unlinkSync(socketPath);
  }
  // Created owner-only from the start (no moment at which another user could connect), then
  // made sure of: the socket is the admin API's only lock when ADMIN_TOKEN is unset.
  const previousMask = process.umask(0o177);
  try {
    await app.listen({ path: socketPath });
  } finally {
    process.umask(previousMask);
  }
  chmodSync(socketPath, 0o600);
}

export interface AdminListeners {
  /** The TCP address, when ADMIN_PORT is set. */
  url: string | null;
  socket: string | null;
  close(): Promise<void>;
}

/**
 * The admin API's listeners: the Unix socket (in DATA_DIR by default in embedded mode, or
 * ADMIN_SOCKET) and, with ADMIN_TOKEN, ADMIN_HOST:ADMIN_PORT. Never the public port.
 */
export async function startAdminListeners(deps: Deps, log: Logger): Promise<AdminListeners> {
  const { admin } = deps.config;
  const apps: FastifyInstance[] = [];
  let url: string | null = null;
  try {
    if (admin.socket !== null) {
      const app = await buildAdminApp(deps, { listener: 'socket', logger: log });
      apps.push(app);
      await listenOnSocket(app, admin.socket);
      log.info({ socket: admin.socket, token: admin.token !== undefined }, 'admin API on its Unix socket');
    }
    if (admin.port !== undefined) {
      const app = await buildAdminApp(deps, { listener: 'tcp', logger: log });
      apps.push(app);
      const address = await app.listen({ host: admin.host, port: admin.port });
      url = address;
      log.info({ url: address }, 'admin API on TCP (token required)');
    }
  } catch (error) {
    await Promise.all(apps.map((app) => app.close()));
    throw error;
  }
  return {
    url,
    socket: admin.socket,
    async close() {
      await Promise.all(apps.map((app) => app.close()));
    },
  };
}
