import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { rememberCookies } from './web.js';

/** Debian's Apache 2.4 and mod_auth_openidc (apache2, libapache2-mod-auth-openidc; .ci/run installs them). */
const APACHE_BINARY = '/usr/sbin/apache2';
const MODULES = '/usr/lib/apache2/modules';
export const apacheAvailable = () => existsSync(APACHE_BINARY) && existsSync(path.join(MODULES, 'mod_auth_openidc.so'));

/** One relying party: a virtual host on its own loopback port with its own mod_auth_openidc configuration. */
export interface RelyingPartySite {
  port: number;
  clientId: string;
  clientSecret: string;
  tokenEndpointAuth: 'client_secret_basic' | 'client_secret_post';
}

export interface ApacheServer {
  readonly root: string;
  errorLog(): Promise<string>;
  stop(): Promise<void>;
}

const START_BOUND_MS = 20_000;

function siteConfig(issuer: string, site: RelyingPartySite): string {
  const base = `http://127.0.0.1:${site.port}`;
  return `
<VirtualHost 127.0.0.1:${site.port}>
  ServerName 127.0.0.1:${site.port}
  OIDCProviderMetadataURL ${issuer}/.well-known/openid-configuration
  OIDCClientID ${site.clientId}
  OIDCClientSecret ${site.clientSecret}
  OIDCProviderTokenEndpointAuth ${site.tokenEndpointAuth}
  OIDCRedirectURI ${base}/protected/redirect_uri
  OIDCCryptoPassphrase interop-test-passphrase-${site.port}
  OIDCScope "openid email"
  OIDCPKCEMethod S256
  OIDCSSLValidateServer Off
  OIDCInfoHook access_token id_token userinfo session
  <Location /protected>
    AuthType openid-connect
    Require valid-user
  </Location>
</VirtualHost>
`;
}

/**
 * Apache in the foreground of a child process, with a configuration of its own in a temporary
 * directory: its own ServerRoot, PidFile, runtime directory and logs, listening only on loopback.
 * Run as root it serves as nobody, as Debian's does as www-data.
 */
export async function startApache(issuer: string, sites: RelyingPartySite[]): Promise<ApacheServer> {
  const root = await mkdtemp(path.join(tmpdir(), 'apache-openidc-'));
  await chmod(root, 0o755);
  await mkdir(path.join(root, 'htdocs', 'protected'), { recursive: true });
  await writeFile(path.join(root, 'htdocs', 'protected', 'index.html'), 'protected page\n');
  await writeFile(path.join(root, 'htdocs', 'loggedout.html'), 'logged out page\n');
  const asRoot = process.getuid?.() === 0;
  const config = `
ServerRoot ${root}
DefaultRuntimeDir ${root}
PidFile ${root}/httpd.pid
ErrorLog ${root}/error.log
LogLevel warn auth_openidc:info
Mutex file:${root} default
${asRoot ? 'User nobody\nGroup nogroup' : ''}
LoadModule mpm_event_module ${MODULES}/mod_mpm_event.so
LoadModule authz_core_module ${MODULES}/mod_authz_core.so
LoadModule authn_core_module ${MODULES}/mod_authn_core.so
LoadModule authz_user_module ${MODULES}/mod_authz_user.so
LoadModule mime_module ${MODULES}/mod_mime.so
LoadModule dir_module ${MODULES}/mod_dir.so
LoadModule auth_openidc_module ${MODULES}/mod_auth_openidc.so
TypesConfig /dev/null
AddType text/html .html
DirectoryIndex index.html
DocumentRoot ${root}/htdocs
ServerName 127.0.0.1
StartServers 1
ServerLimit 1
ThreadsPerChild 8
MaxRequestWorkers 8
${sites.map((site) => `Listen 127.0.0.1:${site.port}`).join('\n')}
<Directory ${root}/htdocs>
  Require all granted
</Directory>
${sites.map((site) => siteConfig(issuer, site)).join('\n')}
`;
  const file = path.join(root, 'httpd.conf');
  await writeFile(file, config);
  const child = spawn(APACHE_BINARY, ['-f', file, '-DFOREGROUND'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const errorLog = () => readFile(path.join(root, 'error.log'), 'utf8').catch(() => '');
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    await rm(root, { recursive: true, force: true });
  };
  const deadline = Date.now() + START_BOUND_MS;
  for (;;) {
    if (child.exitCode !== null) {
      const log = await errorLog();
      await stop();
      throw new Error(`apache2 exited (${child.exitCode}): ${output}\n${log}`);
    }
    const answered = await Promise.all(
      sites.map((site) =>
        fetch(`http://127.0.0.1:${site.port}/loggedout.html`, { signal: AbortSignal.timeout(2_000) }).then(
          (response) => response.ok,
          () => false,
        ),
      ),
    );
    if (answered.every(Boolean)) break;
    if (Date.now() > deadline) {
      const log = await errorLog();
      await stop();
      throw new Error(`apache2 did not answer within ${START_BOUND_MS} ms: ${output}\n${log}`);
    }
    await sleep(100);
  }
  return { root, errorLog, stop };
}

export interface PageResponse {
  status: number;
  location: string | null;
  body: string;
  json<T = Record<string, unknown>>(): T;
}

const REQUEST_BOUND_MS = 15_000;

/**
 * A browser's top-level navigation over node:http (fetch cannot send Sec-Fetch-Mode: navigate,
 * and mod_auth_openidc answers 401 rather than a redirect to what looks like a script's request):
 * one cookie jar for every server it talks to, as browsers do not tell ports apart for cookies,
 * and the CSRF token of the last page that carried one. Never follows redirects by itself.
 */
export class NavigatingBrowser {
  readonly cookies = new Map<string, string>();
  csrfToken: string | null = null;

  get(url: string): Promise<PageResponse> {
    return this.#send(url);
  }

  /** Posts a form with the remembered CSRF token. */
  post(url: string, fields: Record<string, string>): Promise<PageResponse> {
    return this.#send(url, new URLSearchParams({ ...(this.csrfToken ? { csrf_token: this.csrfToken } : {}), ...fields }).toString());
  }

  /** Follows a redirect (absolute or relative to `from`). */
  follow(from: string, response: PageResponse): Promise<PageResponse> {
    if (response.location === null || ![302, 303].includes(response.status)) {
      throw new Error(`not a redirect: ${response.status} ${response.body.slice(0, 300)}`);
    }
    return this.get(new URL(response.location, from).href);
  }

  #send(url: string, form?: string): Promise<PageResponse> {
    const cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const headers: Record<string, string> = {
      accept: 'text/html,application/xhtml+xml,*/*;q=0.8',
      'sec-fetch-mode': 'navigate',
      'sec-fetch-dest': 'document',
      'user-agent': 'Mozilla/5.0 (device-auth interop test)',
      ...(cookie ? { cookie } : {}),
      ...(form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(Buffer.byteLength(form)) }),
    };
    return new Promise((resolve, reject) => {
      const request = httpRequest(url, { method: form === undefined ? 'GET' : 'POST', headers, timeout: REQUEST_BOUND_MS }, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => {
          rememberCookies(this.cookies, response.headers['set-cookie'] ?? []);
          const token = /name="csrf_token" value="([^"]*)"/.exec(body)?.[1];
          if (token) this.csrfToken = token;
          resolve({ status: response.statusCode ?? 0, location: response.headers.location ?? null, body, json: <T>() => JSON.parse(body) as T });
        });
      });
      request.on('timeout', () => request.destroy(new Error(`no answer from ${url} within ${REQUEST_BOUND_MS} ms`)));
      request.on('error', reject);
      request.end(form);
    });
  }
}
