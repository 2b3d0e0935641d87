import type { FastifyReply, FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import type { Deps } from '../../src/deps.js';
import { finding, guard, serveProtocolRequest, type ProtocolEndpoint, type ProtocolExchange } from '../../src/http/protocol-pipeline.js';
import { invalidGrant, tooManyRequests } from '../../src/oauth/errors.js';

/** Only what the runner reads of the dependencies: DPoP nonces off. */
const deps = { config: { dpop: { nonces: false } } } as unknown as Deps;

/** A reply that records what was sent. */
function recordingReply() {
  const sent: { status: number; headers: Record<string, string>; body: unknown } = { status: 200, headers: {}, body: undefined };
  const reply = {
    code(status: number) {
      sent.status = status;
      return reply;
    },
    header(name: string, value: string) {
      sent.headers[name] = value;
      return reply;
    },
    headers(values: Record<string, string>) {
      Object.assign(sent.headers, values);
      return reply;
    },
    send(body: unknown) {
      sent.body = body;
      return reply;
    },
  };
  return { sent, reply: reply as unknown as FastifyReply };
}

interface Exchange extends ProtocolExchange {
  ran: string[];
  found: string | null;
}
const exchange = (): Exchange => ({ request: {} as FastifyRequest, form: {}, client: undefined as never, ran: [], found: null });

const ranSync = (name: string) => guard((_deps, x: Exchange) => void x.ran.push(name));
const ranLater = (name: string, refusal?: Error) =>
  guard(async (_deps, x: Exchange) => {
    await new Promise((resolve) => setImmediate(resolve));
    x.ran.push(name);
    if (refusal) throw refusal;
  });
const finds = (value: string) =>
  finding(
    async (_deps, x: Exchange) => {
      x.ran.push('find');
      return value;
    },
    (_deps, x, found) => {
      x.found = found;
    },
  );

function endpoint(defences: ProtocolEndpoint<Exchange>['defences'], work: ProtocolEndpoint<Exchange>['work'], counted: string[]): ProtocolEndpoint<Exchange> {
  return { defences, work, countOutcome: (_deps, _x, outcome) => void counted.push(outcome), response: (x) => ({ found: x.found }), takesDpopProofs: true };
}

describe('a protocol endpoint runs its steps in their order', () => {
  it('each step, waiting or not, ends before the next begins; what one finds the next reads; the answer is not cached', async () => {
    const counted: string[] = [];
    const x = exchange();
    const { sent, reply } = recordingReply();
    await serveProtocolRequest(
      deps,
      endpoint([ranSync('limit'), ranLater('client'), ranSync('check')], [finds('tokens'), ranSync('after')], counted),
      x,
      reply,
    );
    expect(x.ran).toEqual(['limit', 'client', 'check', 'find', 'after']);
    expect(sent).toEqual({ status: 200, headers: { 'Cache-Control': 'no-store', Pragma: 'no-cache' }, body: { found: 'tokens' } });
    expect(counted).toEqual(['issued']);
  });

  it('a defence that refuses after waiting (a limit counted in the store) stops the request and goes to the error handler, counted nowhere', async () => {
    const counted: string[] = [];
    const x = exchange();
    const refusal = tooManyRequests('too many requests; retry after 5 seconds', 5);
    await expect(
      serveProtocolRequest(deps, endpoint([ranLater('limit', refusal), ranSync('form')], [ranSync('work')], counted), x, recordingReply().reply),
    ).rejects.toBe(refusal);
    expect(x.ran).toEqual(['limit']);
    expect(counted).toEqual([]);
  });

  it("the work's OAuth error is the answer, counted by its code, with no-store", async () => {
    const counted: string[] = [];
    const { sent, reply } = recordingReply();
    await serveProtocolRequest(deps, endpoint([], [ranLater('grant', invalidGrant('unknown device_code'))], counted), exchange(), reply);
    expect(sent.status).toBe(400);
    expect(sent.body).toEqual({ error: 'invalid_grant', error_description: 'unknown device_code' });
    expect(sent.headers['Cache-Control']).toBe('no-store');
    expect(counted).toEqual(['invalid_grant']);
  });

  it('an unexpected failure in the work is counted as server_error and left to the error handler', async () => {
    const counted: string[] = [];
    const failure = new Error('bug');
    await expect(serveProtocolRequest(deps, endpoint([], [ranLater('grant', failure)], counted), exchange(), recordingReply().reply)).rejects.toBe(failure);
    expect(counted).toEqual(['server_error']);
  });
});
