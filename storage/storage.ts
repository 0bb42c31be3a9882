import { randomBytes } from 'node:crypto';
import type { ImageType } from './image-type';

/**
 * Where uploaded images live; every object is public (images are linked from emails). Received mail
 * is kept there too, apart: under `inbound/`, never served or linked (inboundKey).
 */
export interface ImageStorage {
  /** Stores the bytes under `key` (see uploadKey) and returns the URL anyone can fetch them at. */
  put(key: string, bytes: Buffer, contentType: string): Promise<string>;
  /** Keeps a received message under `key` (see inboundKey), private. */
  keepInbound(key: string, raw: Buffer): Promise<void>;
  /** Removes every object of the project (keys `<projectId>/…` and `inbound/<projectId>/…`), when the project is deleted. */
  removeProject(projectId: string): Promise<void>;
  /** Folder the API serves the objects from itself; undefined when another server serves them. */
  readonly localRoot?: string;
}

/** Objects never change once written: caches may keep them for a year without asking again. */
export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable';

const EXTENSION_TYPES: Record<ImageType['extension'], ImageType['contentType']> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
};

/**
 * `<projectId>/<32 random hex>.<ext>`. The name is drawn at random (not the time-ordered upload
 * id) so one project's image URLs cannot be guessed from another's.
 */
export const uploadKey = (projectId: string, type: ImageType) => `${projectId}/${randomBytes(16).toString('hex')}.${type.extension}`;

/** `inbound/<projectId>/<32 random hex>.eml`: a received message, kept as it came (mail/inbound). */
export const inboundKey = (projectId: string) => `${inboundPrefix(projectId)}${randomBytes(16).toString('hex')}.eml`;

const INBOUND_KEY = /^inbound\/[A-Za-z0-9_]{1,64}\/[0-9a-f]{32}\.eml$/;

/** Refuses anything but a key inboundKey made, so a key can never name a file outside its folder. */
export function checkInboundKey(key: string): string {
  if (!INBOUND_KEY.test(key)) throw new Error(`Not an inbound message key: ${key}`);
  return key;
}

export const inboundPrefix = (projectId: string) => `inbound/${projectPrefix(projectId)}`;

const PROJECT = /^[A-Za-z0-9_]{1,64}$/;
const KEY = /^[A-Za-z0-9_]{1,64}\/[0-9a-f]{32}\.(png|jpg|gif|webp)$/;

/** The `<projectId>/` prefix of its keys; refuses an id that could name anything else. */
export function projectPrefix(projectId: string): string {
  if (!PROJECT.test(projectId)) throw new Error(`Not a project id: ${projectId}`);
  return `${projectId}/`;
}

/**
 * The content type of a well-formed key, undefined for anything else. Only keys of exactly the
 * shape uploadKey makes pass (no dots but the extension's, no other separators), so a key taken
 * from a URL can never name a file outside the storage folder.
 */
export function keyContentType(key: string): ImageType['contentType'] | undefined {
  const match = KEY.exec(key);
  return match ? EXTENSION_TYPES[match[1] as ImageType['extension']] : undefined;
}
