import { crc32, deflateSync } from 'node:zlib';

/**
 * 1×1 images in each accepted format, assembled byte by byte so tests need no image library.
 * Each one decodes (checked with ImageMagick and dwebp when written), not just its signature.
 */

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

function pngChunk(type: string, data: Buffer): Buffer {
  const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  return Buffer.concat([u32(data.length), typed, u32(crc32(typed))]);
}

/** A 1×1 RGB PNG of the given colour. */
export function png(rgb: [number, number, number] = [255, 0, 0]): Buffer {
  const ihdr = Buffer.concat([u32(1), u32(1), Buffer.from([8, 2, 0, 0, 0])]); // 8-bit RGB, no interlace
  const scanline = Buffer.from([0, ...rgb]); // filter type 0, then the pixel
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(scanline)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A 1×1 grey baseline JPEG: one quantisation table, one-code Huffman tables, a DC of 0 and EOB. */
export function jpeg(): Buffer {
  const segment = (marker: number, body: number[]) => [0xff, marker, (body.length + 2) >> 8, (body.length + 2) & 0xff, ...body];
  const oneCodeTable = (classAndId: number) => segment(0xc4, [classAndId, 1, ...new Array<number>(15).fill(0), 0x00]);
  return Buffer.from([
    0xff, 0xd8, // SOI
    ...segment(0xdb, [0x00, ...new Array<number>(64).fill(1)]), // DQT 0
    ...segment(0xc0, [8, 0, 1, 0, 1, 1, 1, 0x11, 0]), // SOF0: 8 bit, 1×1, one component
    ...oneCodeTable(0x00), // DC table 0: code "0" = category 0
    ...oneCodeTable(0x10), // AC table 0: code "0" = EOB
    ...segment(0xda, [1, 1, 0x00, 0, 63, 0]), // SOS
    0b00111111, // DC "0", EOB "0", padded with ones
    0xff, 0xd9, // EOI
  ]);
}

/** A 1×1 GIF89a with a two-colour palette; LZW: clear, index 0, end. */
export function gif(): Buffer {
  return Buffer.from([
    ...Buffer.from('GIF89a', 'latin1'),
    1, 0, 1, 0, 0x80, 0, 0, // screen 1×1, global palette of 2 colours
    0, 0, 0, 255, 255, 255, // palette
    0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, // image descriptor 1×1 at 0,0
    2, 2, 0x44, 0x01, 0, // LZW min code size 2, one 2-byte block, terminator
    0x3b, // trailer
  ]);
}

/** A 1×1 lossless WebP (VP8L): five single-symbol prefix codes, so the pixel itself takes no bits. */
export function webp(): Buffer {
  const bits: number[] = [];
  const put = (value: number, count: number) => {
    for (let i = 0; i < count; i++) bits.push((value >> i) & 1);
  };
  put(0, 14); // width - 1
  put(0, 14); // height - 1
  put(0, 1); // alpha hint
  put(0, 3); // version
  put(0, 1); // no transform
  put(0, 1); // no colour cache
  put(0, 1); // no meta prefix codes
  for (const symbol of [0, 0, 0, 255, 0]) {
    // green, red, blue, alpha, distance: "simple" code of one symbol
    put(1, 1);
    put(0, 1);
    if (symbol > 1) {
      put(1, 1);
      put(symbol, 8);
    } else {
      put(0, 1);
      put(symbol, 1);
    }
  }
  const data = Buffer.alloc(1 + Math.ceil(bits.length / 8));
  data[0] = 0x2f;
  bits.forEach((bit, i) => (data[1 + (i >> 3)]! |= bit << (i & 7)));
  const chunk = Buffer.concat([Buffer.from('VP8L', 'latin1'), Buffer.from(u32(data.length)).reverse(), data, Buffer.alloc(data.length % 2)]);
  return Buffer.concat([Buffer.from('RIFF', 'latin1'), Buffer.from(u32(4 + chunk.length)).reverse(), Buffer.from('WEBP', 'latin1'), chunk]);
}
