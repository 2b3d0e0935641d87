import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A receiver of events (webhooks, Shared Signals push) on 127.0.0.1 over plain http, which the
 * server may reach only with EVENTS_ALLOW_LOOPBACK=true. It records every request and answers as
 * the test says: a status, or never (a receiver that hangs).
 */

export interface ReceivedDelivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Date.now() when it arrived. */
  at: number;
}

/** What to answer a request: a status (with headers), or 'hang' to leave it unanswered until the receiver closes. */
export type Answer = number | { status: number; headers: Record<string, string> } | 'hang';

export interface Receiver {
  /** http://127.0.0.1:PORT */
  origin: string;
  url(path?: string): string;
  /** Every request, in the order it arrived. */
  received: ReceivedDelivery[];
  /** Requests answered or hanging right now, and the most there ever were at once. */
  open: number;
  mostOpenAtOnce: number;
  /** Decides each answer; by default 200. */
  answer: (request: ReceivedDelivery, index: number) => Answer;
  /** Resolves once `count` requests have arrived, or rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedDelivery[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    origin: '',
    url: (path = '/hook') => `${receiver.origin}${path}`,
    received: [],
    open: 0,
    mostOpenAtOnce: 0,
    answer: () => 200,
    waitFor(count, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (receiver.received.length < count) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(receiver.received.slice(0, count));
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the receiver got ${receiver.received.length} of ${count} requests within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      for (const response of hanging) response.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((request, response) => {
    receiver.open += 1;
    receiver.mostOpenAtOnce = Math.max(receiver.mostOpenAtOnce, receiver.open);
    response.on('close', () => {
      receiver.open -= 1;
      hanging.delete(response);
    });
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const delivery = { path: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      const index = receiver.received.length;
      receiver.received.push(delivery);
      for (const waiter of [...waiters]) waiter();
      const answer = receiver.answer(delivery, index);
      if (answer === 'hang') {
        hanging.add(response);
        return;
      }
      const { status, headers } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
      response.writeHead(status, { 'content-type': 'text/plain', ...headers }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}
