import qrcode from 'qrcode-terminal';
import type { DeviceAuthorizationResponse } from '../oauth/device/authorization.js';

/**
 * A device simulator: behaves like a TV. It asks for a code, shows what a TV shows (user code,
 * verification URI, confirmation phrase, QR code of verification_uri_complete) and polls the
 * token endpoint honouring interval and slow_down, until approved, denied or expired.
 * The screen goes to `screen` (stderr); the token response is the result (stdout).
 */
export interface LoginOptions {
  issuer: string;
  clientId: string;
  clientSecret?: string | undefined;
  scope?: string | undefined;
  platformName?: string | undefined;
  screen: (text: string) => void;
  sleep?: (seconds: number) => Promise<void>;
}

export class LoginStopped extends Error {
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
}

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const defaultSleep = (seconds: number) => new Promise<void>((r) => setTimeout(r, seconds * 1000));

function qr(text: string): Promise<string> {
  return new Promise((resolve) => qrcode.generate(text, { small: true }, resolve));
}

async function post(url: string, form: Record<string, string | undefined>, options: LoginOptions) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) if (v !== undefined) body.set(k, v);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (options.clientSecret !== undefined) {
    const basic = `${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
  } else {
    body.set('client_id', options.clientId);
  }
  const res = await fetch(url, { method: 'POST', headers, body });
  const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  return { status: res.status, json };
}

export async function simulateDeviceLogin(options: LoginOptions): Promise<Record<string, unknown>> {
  const sleep = options.sleep ?? defaultSleep;
  const issuer = options.issuer.replace(/\/+$/, '');
  const metaRes = await fetch(`${issuer}/.well-known/oauth-authorization-server`);
  if (!metaRes.ok) throw new LoginStopped('error', `no authorization server metadata at ${issuer} (HTTP ${metaRes.status})`);
  const meta = (await metaRes.json()) as Metadata;

  // A client with a secret is a bot (TVs are public clients): the simulator says which it plays.
  const playing = options.clientSecret === undefined ? 'a TV' : 'a bot';
  const code = await post(
    meta.device_authorization_endpoint,
    { scope: options.scope, platform_name: options.platformName ?? 'device-auth simulator', platform_description: `A terminal pretending to be ${playing}` },
    options,
  );
  if (code.status !== 200) {
    throw new LoginStopped('error', `device code request refused: ${String(code.json.error)}: ${String(code.json.error_description ?? '')}`);
  }
  const auth = code.json as unknown as DeviceAuthorizationResponse;

  options.screen(
    [
      `  device-auth simulator, pretending to be ${playing}`,
      '',
      `  On your phone or computer, go to:  ${auth.verification_uri}`,
      `  and enter the code:                ${auth.user_code}`,
      '',
      `  When asked, pick this phrase:      ${auth.confirmation_phrase}`,
      '',
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
    const res = await post(meta.token_endpoint, { grant_type: DEVICE_GRANT, device_code: auth.device_code }, options);
    if (res.status === 200) {
      options.screen('  Approved. Signed in.\n');
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
