import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Deps } from '../deps.js';
import { badRequest } from '../ssf/errors.js';
import { pollRequest, pollSets } from '../ssf/poll.js';
import { authenticateReceiver, type Receiver, type RequiredScope } from '../ssf/receivers.js';
import {
  changeSubject,
  createStream,
  deleteStream,
  readStatus,
  readStreams,
  replaceStream,
  requestVerification,
  setStatus,
  transmitterConfiguration,
  statusChange,
  streamChange,
  streamCreation,
  streamReference,
  subjectChange,
  updateStream,
  verificationRequest,
} from '../ssf/streams.js';
import { SCOPE_TO_MANAGE, SCOPE_TO_READ, SSF_PATHS } from '../ssf/vocabulary.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The app calling a Shared Signals endpoint, authenticated before the route runs. */
    ssfReceiver: Receiver | null;
  }
  interface FastifyContextConfig {
    /** The scope a Shared Signals route needs (ssf.read or ssf.manage). */
    ssfScope?: RequiredScope;
  }
}

/** Parses a JSON body or query with zod; the first problem is a 400 naming the field. */
function parse<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const name = issue?.path.join('.') || 'the request';
  throw badRequest(`${name} is invalid: ${issue?.message ?? 'invalid value'}`);
}

const read = { config: { ssfScope: SCOPE_TO_READ } } as const;
const manage = { config: { ssfScope: SCOPE_TO_MANAGE } } as const;

const noStore = (reply: FastifyReply) => reply.header('Cache-Control', 'no-store');

/**
 * The Shared Signals transmitter (SSF 1.0, issue 32 §3): its configuration document, the stream
 * management API and the poll endpoint (RFC 8936). JSON bodies, read here only (the rest of the
 * public app takes none): UTF-8 or refused. Every route but the configuration document needs an
 * app's own token (the client_credentials grant) with the route's scope, checked before its body is read.
 */
export async function ssfRoutes(app: FastifyInstance, deps: Deps): Promise<void> {
  const configuration = transmitterConfiguration(deps.config.issuer);
  app.get('/.well-known/ssf-configuration', async (_request, reply) => reply.header('Cache-Control', 'public, max-age=300').send(configuration));

  await app.register(async (ssf) => {
    const parseJson = ssf.getDefaultJsonParser('error', 'error');
    ssf.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      if (!isUtf8(body as Buffer)) return done(badRequest('the body is not valid UTF-8'), undefined);
      parseJson(request, (body as Buffer).toString('utf8'), done);
    });
    ssf.decorateRequest('ssfReceiver', null);
    // Before the body is read: a request without the right token gets nothing parsed.
    ssf.addHook('onRequest', async (request: FastifyRequest) => {
      const scope = request.routeOptions.config.ssfScope;
      if (scope === undefined) return;
      // RFC 9449 §4.2: a proof's htu is the URL without its query.
      const url = `${deps.config.issuer}${request.url.split('?', 1)[0]}`;
      request.ssfReceiver = await authenticateReceiver(deps, request.headers.authorization, { dpop: request.headers.dpop, method: request.method, url }, scope);
    });
    const receiver = (request: FastifyRequest) => request.ssfReceiver as Receiver;
    const streamIdOf = (request: FastifyRequest) => parse(streamReference.partial(), request.query).stream_id;

    // SSF 1.0 §8.1.1: one configuration endpoint, a method per operation.
    ssf.post(SSF_PATHS.configuration, manage, async (request, reply) => {
      const created = await createStream(deps, receiver(request), parse(streamCreation, request.body));
      return noStore(reply).code(201).send(created);
    });
    ssf.get(SSF_PATHS.configuration, read, async (request, reply) => noStore(reply).send(await readStreams(deps, receiver(request), streamIdOf(request))));
    ssf.patch(SSF_PATHS.configuration, manage, async (request, reply) =>
      noStore(reply).send(await updateStream(deps, receiver(request), parse(streamChange, request.body))),
    );
    ssf.put(SSF_PATHS.configuration, manage, async (request, reply) =>
      noStore(reply).send(await replaceStream(deps, receiver(request), parse(streamChange, request.body))),
    );
    ssf.delete(SSF_PATHS.configuration, manage, async (request, reply) => {
      await deleteStream(deps, receiver(request), parse(streamReference, request.query).stream_id);
      return noStore(reply).code(204).send();
    });

    // SSF 1.0 §8.1.2
    ssf.get(SSF_PATHS.status, read, async (request, reply) =>
      noStore(reply).send(await readStatus(deps, receiver(request), parse(streamReference, request.query).stream_id)),
    );
    ssf.post(SSF_PATHS.status, manage, async (request, reply) =>
      noStore(reply).send(await setStatus(deps, receiver(request), parse(statusChange, request.body))),
    );

    // SSF 1.0 §8.1.3: 200 with no body to add, 204 to remove.
    ssf.post(SSF_PATHS.addSubject, manage, async (request, reply) => {
      await changeSubject(deps, receiver(request), parse(subjectChange, request.body), 'add');
      return noStore(reply).code(200).send();
    });
    ssf.post(SSF_PATHS.removeSubject, manage, async (request, reply) => {
      await changeSubject(deps, receiver(request), parse(subjectChange, request.body), 'remove');
      return noStore(reply).code(204).send();
    });

    // SSF 1.0 §8.1.4.2
    ssf.post(SSF_PATHS.verification, manage, async (request, reply) => {
      await requestVerification(deps, receiver(request), parse(verificationRequest, request.body));
      return noStore(reply).code(204).send();
    });

    // RFC 8936: a poll may wait for SETs; it stops waiting when the receiver goes away.
    ssf.post<{ Params: { streamId: string } }>(`${SSF_PATHS.poll}/:streamId`, manage, async (request, reply) => {
      const gone = new AbortController();
      reply.raw.once('close', () => gone.abort());
      const answer = await pollSets(deps, receiver(request), request.params.streamId, parse(pollRequest, request.body), gone.signal);
      return noStore(reply).send(answer);
    });
  });
}
