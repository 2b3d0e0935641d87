import { readFileSync, statSync } from 'node:fs';

const MAX_LOGO_BYTES = 256 * 1024;

/** Raster formats by their first bytes; anything else is refused at start, not served as a guess. */
function imageType(bytes: Buffer): string | null {
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.subarray(0, 6).toString('latin1') === 'GIF87a' || bytes.subarray(0, 6).toString('latin1') === 'GIF89a') return 'image/gif';
  if (bytes.subarray(0, 4).toString('latin1') === 'RIFF' && bytes.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  return null;
}

export interface ServiceLogo {
  bytes: Buffer;
  contentType: string;
}

/** The operator's logo (SERVICE_LOGO_FILE), read once at start and served from our own origin. */
export function readServiceLogo(file: string): ServiceLogo {
  let size: number;
  try {
    size = statSync(file).size;
  } catch {
    throw new Error(`SERVICE_LOGO_FILE ${file} cannot be read`);
  }
  if (size > MAX_LOGO_BYTES) throw new Error(`SERVICE_LOGO_FILE ${file} is larger than ${MAX_LOGO_BYTES / 1024} KB`);
  const bytes = readFileSync(file);
  const contentType = imageType(bytes);
  if (!contentType) throw new Error(`SERVICE_LOGO_FILE ${file} is not a PNG, JPEG, GIF or WebP image`);
  return { bytes, contentType };
}
