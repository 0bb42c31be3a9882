import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { checkInboundKey, inboundPrefix, keyContentType, projectPrefix, type ImageStorage } from './storage';

/**
 * Images under `<dataDir>/uploads/<key>`, served by the API at `<publicUrl>/uploads/<key>`
 * (api/routes/uploads.ts). Fine for one API process or a shared volume; several hosts need S3.
 * Received messages under `<dataDir>/<key>` (`inbound/…`), outside the served folder.
 */
export class LocalDiskStorage implements ImageStorage {
  readonly localRoot: string;
  private readonly dataRoot: string;
  private readonly baseUrl: string;

  constructor(dataDir: string, publicUrl: string) {
    this.dataRoot = resolve(dataDir);
    this.localRoot = resolve(dataDir, 'uploads');
    this.baseUrl = `${publicUrl}/uploads`;
  }

  async put(key: string, bytes: Buffer): Promise<string> {
    if (!keyContentType(key)) throw new Error(`Not an upload key: ${key}`);
    await writeWhole(join(this.localRoot, key), bytes);
    return `${this.baseUrl}/${key}`;
  }

  async keepInbound(key: string, raw: Buffer): Promise<void> {
    await writeWhole(join(this.dataRoot, checkInboundKey(key)), raw);
  }

  async removeProject(projectId: string): Promise<void> {
    await rm(join(this.localRoot, projectPrefix(projectId)), { recursive: true, force: true });
    await rm(join(this.dataRoot, inboundPrefix(projectId)), { recursive: true, force: true });
  }
}

/** Written aside, then renamed: a reader never gets half a file. */
async function writeWhole(file: string, bytes: Buffer): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  const partial = `${file}.${randomBytes(6).toString('hex')}.partial`;
  try {
    await writeFile(partial, bytes);
    await rename(partial, file);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
}
