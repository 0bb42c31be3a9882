import type { Request } from 'express';
import busboy from 'busboy';
import { type AppError, validationError } from '../errors';

export interface SingleFileUpload {
  /** Form parts the file may come in; the first one found is taken, others are drained. */
  parts: readonly string[];
  maxBytes: number;
  /** What the file is, for error messages ("the CSV file", "the image"). */
  what: string;
  tooLarge: () => AppError;
}

const missingFile = (message: string) => validationError([{ field: 'file', message, code: 'required' }]);

/**
 * Reads one file from a multipart/form-data request. The whole request is drained before
 * answering, so a client still sending gets its 413 instead of a reset connection.
 */
export function readSingleFile(req: Request, opts: SingleFileUpload): Promise<Buffer> {
  const where = `in the form part "${opts.parts[0]}"`;
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      // busboy signals its limit on reaching it, not on passing it: one byte more tells a file of
      // exactly the limit from a longer one.
      parser = busboy({ headers: req.headers, limits: { fileSize: opts.maxBytes + 1, files: 5 } });
    } catch {
      reject(missingFile(`Expected a multipart/form-data request with ${opts.what} ${where}`));
      return;
    }
    const chunks: Buffer[] = [];
    let found = false;
    let truncated = false;
    parser.on('file', (name, stream) => {
      if (!opts.parts.includes(name) || found) {
        stream.resume();
        return;
      }
      found = true;
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('limit', () => {
        truncated = true;
      });
    });
    parser.on('error', (err) => reject(missingFile(`The multipart body could not be read: ${(err as Error).message}`)));
    parser.on('close', () => {
      if (truncated) reject(opts.tooLarge());
      else if (!found) reject(missingFile(`Send ${opts.what} as the multipart form part "${opts.parts[0]}"`));
      else resolve(Buffer.concat(chunks));
    });
    req.pipe(parser);
  });
}
