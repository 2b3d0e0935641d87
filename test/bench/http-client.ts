import net from 'node:net';

/**
 * A minimal HTTP/1.1 keep-alive client over one socket, for loopback load generation only.
 *
 * Why not undici or node:http: on this 2-core machine the generator has one core to the server's
 * one, so its cost per request bounds what can be measured. Against a bare Fastify endpoint,
 * node:http spent about 30 µs of client CPU per request, undici 7's Pool about 27-43 µs and fetch
 * far more; this client spends about 14 µs, so it can drive twice the rate the server's core
 * reaches on its cheapest route. It speaks just what the benchmark needs: one request at a time
 * per connection, Content-Length or chunked responses, `Connection: close` honoured.
 */
export interface HttpResponse {
  status: number;
  body: string;
}

const HEADER_END = Buffer.from('\r\n\r\n');

interface Pending {
  resolve(response: HttpResponse): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

export class KeepAliveConnection {
  #socket: net.Socket | null = null;
  #buffer: Buffer = Buffer.alloc(0);
  #pending: Pending | null = null;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {}

  /** Sends one raw request and resolves with the response; rejects on timeout or a broken connection. */
  async send(raw: string, timeoutMs: number): Promise<HttpResponse> {
    if (this.#pending) throw new Error('one request at a time per connection');
    const socket = this.#socket ?? (await this.#connect(timeoutMs));
    return new Promise<HttpResponse>((resolve, reject) => {
      const timer = setTimeout(() => this.#fail(new Error('timeout')), timeoutMs);
      this.#pending = { resolve, reject, timer };
      socket.write(raw);
    });
  }

  close(): void {
    this.#socket?.destroy();
    this.#socket = null;
  }

  #connect(timeoutMs: number): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: this.host, port: this.port, noDelay: true });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('connect timeout'));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        this.#socket = socket;
        this.#buffer = Buffer.alloc(0);
        resolve(socket);
      });
      socket.on('error', (error) => {
        clearTimeout(timer);
        if (this.#socket === socket) this.#fail(error);
        else reject(error);
      });
      socket.on('close', () => {
        if (this.#socket === socket) this.#fail(new Error('connection closed'));
      });
      socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    });
  }

  #fail(error: Error): void {
    const pending = this.#pending;
    this.#pending = null;
    this.close();
    if (pending) {
      clearTimeout(pending.timer);
      pending.reject(error);
    }
  }

  #onData(chunk: Buffer): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const parsed = parseResponse(this.#buffer);
    if (!parsed) return;
    if (parsed === 'invalid') {
      this.#fail(new Error('unparseable response'));
      return;
    }
    this.#buffer = this.#buffer.subarray(parsed.consumed);
    const pending = this.#pending;
    this.#pending = null;
    if (parsed.close) this.close();
    if (pending) {
      clearTimeout(pending.timer);
      pending.resolve({ status: parsed.status, body: parsed.body });
    }
  }
}

interface Parsed {
  status: number;
  body: string;
  close: boolean;
  consumed: number;
}

/** One complete response at the start of `buffer`, null when more bytes are needed. */
function parseResponse(buffer: Buffer): Parsed | 'invalid' | null {
  const headerEnd = buffer.indexOf(HEADER_END);
  if (headerEnd < 0) return null;
  const head = buffer.toString('latin1', 0, headerEnd).toLowerCase();
  const status = Number(head.slice(9, 12));
  if (!head.startsWith('http/1.') || !Number.isInteger(status)) return 'invalid';
  const close = /\r\nconnection: *close/.test(head);
  const bodyStart = headerEnd + HEADER_END.length;
  const length = /\r\ncontent-length: *(\d+)/.exec(head);
  if (length) {
    const end = bodyStart + Number(length[1]);
    if (buffer.length < end) return null;
    return { status, close, body: buffer.toString('utf8', bodyStart, end), consumed: end };
  }
  if (/\r\ntransfer-encoding: *chunked/.test(head)) {
    const parts: string[] = [];
    let at = bodyStart;
    for (;;) {
      const lineEnd = buffer.indexOf('\r\n', at);
      if (lineEnd < 0) return null;
      const size = parseInt(buffer.toString('latin1', at, lineEnd), 16);
      if (!Number.isInteger(size)) return 'invalid';
      const dataStart = lineEnd + 2;
      if (buffer.length < dataStart + size + 2) return null;
      if (size === 0) return { status, close, body: parts.join(''), consumed: dataStart + 2 };
      parts.push(buffer.toString('utf8', dataStart, dataStart + size));
      at = dataStart + size + 2;
    }
  }
  // No length and not chunked: only bodiless statuses are expected here.
  return { status, close, body: '', consumed: bodyStart };
}

/** A raw request; `body` is a form (ASCII), sent with its Content-Length. */
export function rawRequest(method: 'GET' | 'POST', path: string, host: string, headers: Record<string, string>, body?: string): string {
  let head = `${method} ${path} HTTP/1.1\r\nhost: ${host}\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  if (body === undefined) return `${head}\r\n`;
  return `${head}content-type: application/x-www-form-urlencoded\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
