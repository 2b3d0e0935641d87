import { createHash, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import qrcode from 'qrcode-terminal';
import type { DeviceAuthorizationResponse, StandardDeviceAuthorizationResponse } from '../oauth/device/authorization.js';

/**
 * A device simulator: behaves like a TV. It asks for a code, shows what a TV shows (user code,
 * verification URI, confirmation phrase when the app's devices show one, QR code of
 * verification_uri_complete) and polls the
 * token endpoint honouring interval and slow_down, until approved, denied or expired.
 * The screen goes to `screen` (stderr); the token response is the result (stdout).
 */
export interface LoginOptions {
  issuer: string;
  clientId: string;
  clientSecret?: string | undefined;
  scope?: string | undefined;
  platformName?: string | undefined;
  /** RFC 9449: a fresh ES256 key binds the request and its tokens; every request carries a proof. */
  dpop?: boolean | undefined;
  screen: (text: string) => void;
  sleep?: (seconds: number) => Promise<void>;
}

class LoginStopped extends Error {
  constructor(
    readonly reason: 'denied' | 'expired' | 'error',
    message: string,
  ) {
    super(message);
  }
}

interface Metadata {
  device_authorization_endpoint: string;
  token_endpoint: string;
  userinfo_endpoint?: string;
}

/** The device's DPoP key and the server's latest nonce (RFC 9449 §8), if it sent one. */
interface DpopState {
  privateKey: CryptoKey;
  jwk: JWK;
  nonce: string | undefined;
}

async function newDpopState(): Promise<DpopState> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  return { privateKey, jwk: await exportJWK(publicKey), nonce: undefined };
}

/** RFC 9449 §4.2: a new proof (new jti) for each request. */
function dpopProof(state: DpopState, method: string, url: string, accessToken?: string): Promise<string> {
  return new SignJWT({
    htm: method,
    htu: url,
    jti: randomBytes(16).toString('base64url'),
    ...(accessToken === undefined ? {} : { ath: createHash('sha256').update(accessToken).digest('base64url') }),
    ...(state.nonce === undefined ? {} : { nonce: state.nonce }),
  })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: state.jwk })
    .setIssuedAt()
    .sign(state.privateKey);
}

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const defaultSleep = (seconds: number) => new Promise<void>((r) => setTimeout(r, seconds * 1000));

function qr(text: string): Promise<string> {
  return new Promise((resolve) => qrcode.generate(text, { small: true }, resolve));
}

async function post(url: string, form: Record<string, string | undefined>, options: LoginOptions, dpop: DpopState | null) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) if (v !== undefined) body.set(k, v);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (options.clientSecret !== undefined) {
    const basic = `${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
  } else {
    body.set('client_id', options.clientId);
  }
  // One retry when the server asks for a nonce (RFC 9449 §8): the answer carried it.
  for (let attempt = 0; ; attempt++) {
    if (dpop) headers.dpop = await dpopProof(dpop, 'POST', url);
    const res = await fetch(url, { method: 'POST', headers, body });
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (dpop) dpop.nonce = res.headers.get('dpop-nonce') ?? dpop.nonce;
    if (dpop && attempt === 0 && json.error === 'use_dpop_nonce') continue;
    return { status: res.status, json };
  }
}

/** OIDC Core §5.3 with the bound token (RFC 9449 §7), retried once for a nonce. */
async function dpopUserinfo(url: string, accessToken: string, dpop: DpopState): Promise<Record<string, unknown>> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url, { headers: { authorization: `DPoP ${accessToken}`, dpop: await dpopProof(dpop, 'GET', url, accessToken) } });
    dpop.nonce = res.headers.get('dpop-nonce') ?? dpop.nonce;
    if (attempt === 0 && res.status === 401 && /error="use_dpop_nonce"/.test(res.headers.get('www-authenticate') ?? '')) continue;
    if (!res.ok) throw new LoginStopped('error', `userinfo refused the DPoP-bound token (HTTP ${res.status})`);
    return (await res.json()) as Record<string, unknown>;
  }
}

export async function simulateDeviceLogin(options: LoginOptions): Promise<Record<string, unknown>> {
  const sleep = options.sleep ?? defaultSleep;
  const issuer = options.issuer.replace(/\/+$/, '');
  const metaRes = await fetch(`${issuer}/.well-known/oauth-authorization-server`);
  if (!metaRes.ok) throw new LoginStopped('error', `no authorization server metadata at ${issuer} (HTTP ${metaRes.status})`);
  const meta = (await metaRes.json()) as Metadata;

  // A client with a secret is a bot (TVs are public clients): the simulator says which it plays.
  const playing = options.clientSecret === undefined ? 'a TV' : 'a bot';
  const dpop = options.dpop ? await newDpopState() : null;
  const code = await post(
    meta.device_authorization_endpoint,
    { scope: options.scope, platform_name: options.platformName ?? 'device-auth simulator', platform_description: `A terminal pretending to be ${playing}` },
    options,
    dpop,
  );
  if (code.status !== 200) {
    throw new LoginStopped('error', `device code request refused: ${String(code.json.error)}: ${String(code.json.error_description ?? '')}`);
  }
  const auth = code.json as unknown as StandardDeviceAuthorizationResponse & Partial<DeviceAuthorizationResponse>;

  options.screen(
    [
      `  device-auth simulator, pretending to be ${playing}`,
      '',
      `  On your phone or computer, go to:  ${auth.verification_uri}`,
      `  and enter the code:                ${auth.user_code}`,
      '',
      // An app registered without the phrase (--no-confirmation-phrase) gets none: nothing to pick.
      ...(auth.confirmation_phrase === undefined ? [] : [`  When asked, pick this phrase:      ${auth.confirmation_phrase}`, '']),
      '  Or scan:',
      await qr(auth.verification_uri_complete),
      `  (the code expires in ${Math.round(auth.expires_in / 60)} minutes)`,
      '',
    ].join('\n'),
  );

  let interval = auth.interval;
  const deadline = Date.now() + auth.expires_in * 1000;
  // Bounded by the code's lifetime: at most expires_in / interval polls.
  while (Date.now() < deadline) {
    await sleep(interval);
    const res = await post(meta.token_endpoint, { grant_type: DEVICE_GRANT, device_code: auth.device_code }, options, dpop);
    if (res.status === 200) {
      options.screen('  Approved. Signed in.\n');
      const accessToken = res.json.access_token;
      const openid = String(res.json.scope ?? '')
        .split(' ')
        .includes('openid');
      if (dpop && openid && meta.userinfo_endpoint && typeof accessToken === 'string') {
        const claims = await dpopUserinfo(meta.userinfo_endpoint, accessToken, dpop);
        options.screen(`  Userinfo with the DPoP-bound token: sub ${String(claims.sub)}\n`);
      }
      return res.json;
    }
    const error = String(res.json.error);
    if (error === 'authorization_pending') continue;
    if (error === 'slow_down') {
      // RFC 8628 §3.5: add 5 seconds to this and all later polls.
      interval += 5;
      options.screen(`  (asked to slow down: polling every ${interval} s)\n`);
      continue;
    }
    if (error === 'access_denied') throw new LoginStopped('denied', `denied: ${String(res.json.error_description ?? 'the user refused')}`);
    if (error === 'expired_token') throw new LoginStopped('expired', 'expired: the code was not approved in time; start again');
    throw new LoginStopped('error', `stopped: ${error}: ${String(res.json.error_description ?? '')}`);
  }
  throw new LoginStopped('expired', 'expired: the code was not approved in time; start again');
}
