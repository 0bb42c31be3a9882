import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../../errors';
import { detectImageType } from '../../storage/image-type';
import { uploadKey, type ImageStorage } from '../../storage/storage';
import { newId } from '../ids';
import { query } from '../sql';

export const MAX_IMAGE_BYTES = 10 * 1024 * 1024;

export interface UploadedImage {
  id: string;
  url: string;
  contentType: string;
  size: number;
}

export const imageTooLarge = () =>
  new AppError(413, 'PAYLOAD_TOO_LARGE', `The image exceeds the limit of ${MAX_IMAGE_BYTES} bytes (10 MB)`, {
    suggestion: 'Resize or compress the image to at most 10 MB and upload it again.',
  });

/**
 * Stores an image for the project and records it. The format comes from the bytes alone.
 * The object is written before the row: a failed insert leaves an unreferenced file behind,
 * never a row pointing at nothing.
 */
export async function storeImage(em: EntityManager, storage: ImageStorage, projectId: string, bytes: Buffer): Promise<UploadedImage> {
  if (bytes.length > MAX_IMAGE_BYTES) throw imageTooLarge();
  const type = detectImageType(bytes);
  if (!type) {
    throw new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', 'The file is not a PNG, JPEG, GIF or WebP image', {
      suggestion: 'Upload a PNG, JPEG, GIF or WebP image; the format is read from the file content, not its name or declared type.',
    });
  }
  const key = uploadKey(projectId, type);
  const url = await storage.put(key, bytes, type.contentType);
  const id = newId('upl');
  await query(em, `insert into uploads (id, project_id, storage_key, content_type, size_bytes) values (?, ?, ?, ?, ?)`, [
    id,
    projectId,
    key,
    type.contentType,
    bytes.length,
  ]);
  return { id, url, contentType: type.contentType, size: bytes.length };
}
