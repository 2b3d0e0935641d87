import { request as httpRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { FastifyInstance } from 'fastify';

export interface AdminAnswer {
  status: number;
  body: unknown;
}

/** How the CLI reaches an admin API: a running server's (socket or URL), or one of its own in-process. */
export interface AdminTransport {
  /** Said in errors: where the command went. */
  readonly where: string;
  /** `signal` abandons the request (a long poll the user stopped); the promise then rejects. */
  send(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<AdminAnswer>;
  close(): Promise<void>;
}

const ANSWER_BOUND_MS = 120_000;

function parseAnswer(status: number, text: string): AdminAnswer {
  try {
    return { status, body: text.length > 0 ? JSON.parse(text) : null };
  } catch {
    return { status, body: { detail: text.slice(0, 500) } };
  }
}

/** Over HTTP to a running server: its Unix socket, or ADMIN_URL. */
export function remoteAdmin(target: { socketPath: string } | { url: string }, token: string | undefined): AdminTransport {
  const where = 'socketPath' in target ? `the running server's admin socket ${target.socketPath}` : `the admin API at ${target.url}`;
  return {
    where,
    send(method, path, body, signal) {
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const headers: Record<string, string> = { Accept: 'application/json' };
      if (token !== undefined) headers.Authorization = `Bearer ${token}`;
      if (payload) {
        headers['Content-Type'] = 'application/json';
        headers['Content-Length'] = String(payload.length);
      }
      let options: RequestOptions;
      let send = httpRequest;
      if ('socketPath' in target) {
        options = { socketPath: target.socketPath, path, method, headers };
      } else {
        const url = new URL(path, `${target.url}/`);
        if (url.protocol === 'https:') send = httpsRequest;
        options = { hostname: url.hostname, port: url.port, path: `${url.pathname}${url.search}`, method, headers };
      }
      return new Promise<AdminAnswer>((resolve, reject) => {
        const req = send({ ...options, timeout: ANSWER_BOUND_MS, ...(signal && { signal }) }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve(parseAnswer(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'))));
          res.on('error', reject);
        });
        req.on('timeout', () => req.destroy(new Error(`no answer from ${where} within ${ANSWER_BOUND_MS / 1000} s`)));
        req.on('error', (error) => reject(new Error(`cannot reach ${where}: ${error.message}`)));
        req.end(payload);
      });
    },
    close: async () => {},
  };
}

/** No server running: the CLI runs the admin API itself, in this process, on the database. */
export function inProcessAdmin(app: FastifyInstance, token: string | undefined, closeAll: () => Promise<void>): AdminTransport {
  return {
    where: 'the database directly (no server running)',
    send(method, path, body, signal) {
      const answer = app
        .inject({
          method: method as 'GET',
          url: path,
          headers: token !== undefined ? { authorization: `Bearer ${token}` } : {},
          ...(body !== undefined && { payload: body as object }),
        })
        .then((res) => parseAnswer(res.statusCode, res.body));
      if (!signal) return answer;
      // The injected request runs on (closing the app ends a long poll at once); its caller is answered now.
      return new Promise<AdminAnswer>((resolve, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        answer.then(resolve, reject);
      });
    },
    close: closeAll,
  };
}
