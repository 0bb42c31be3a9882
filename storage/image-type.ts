/** An image format the service accepts, recognised from the file's first bytes. */
export interface ImageType {
  contentType: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
  extension: 'png' | 'jpg' | 'gif' | 'webp';
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const ascii = (bytes: Buffer, start: number, end: number) => bytes.subarray(start, end).toString('latin1');

/**
 * Reads the format from the content, never from the name or the declared type: a client can
 * name or label anything `.png`. Beyond the signature each format's first structure is checked
 * too (PNG's IHDR chunk, JPEG's first marker, the WebP RIFF form and its VP8 chunk), so a text
 * file that merely starts with the right letters is not taken for an image.
 */
export function detectImageType(bytes: Buffer): ImageType | undefined {
  if (bytes.length >= 16 && bytes.subarray(0, 8).equals(PNG_SIGNATURE) && ascii(bytes, 12, 16) === 'IHDR') {
    return { contentType: 'image/png', extension: 'png' };
  }
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff && bytes[3]! >= 0xc0 && bytes[3]! !== 0xff) {
    return { contentType: 'image/jpeg', extension: 'jpg' };
  }
  if (bytes.length >= 13 && ['GIF87a', 'GIF89a'].includes(ascii(bytes, 0, 6))) {
    return { contentType: 'image/gif', extension: 'gif' };
  }
  if (
    bytes.length >= 16 &&
    ascii(bytes, 0, 4) === 'RIFF' &&
    ascii(bytes, 8, 12) === 'WEBP' &&
    ['VP8 ', 'VP8L', 'VP8X'].includes(ascii(bytes, 12, 16))
  ) {
    return { contentType: 'image/webp', extension: 'webp' };
  }
  return undefined;
}
