import type { Response } from 'express';
import { z } from 'zod';
import { imageTooLarge, MAX_IMAGE_BYTES, storeImage } from '../../db/templates/uploads';
import { AppError } from '../../errors';
import { IMMUTABLE_CACHE_CONTROL, keyContentType } from '../../storage/storage';
import type { AppDeps } from '../context';
import { readSingleFile } from '../multipart';
import type { RouteRegistry } from '../routing';


const uploadResponse = z.object({
  id: z.string(),
  url: z.string().describe('Public URL of the image, for use in email bodies; stable and cacheable forever'),
  contentType: z.enum(['image/png', 'image/jpeg', 'image/gif', 'image/webp']).describe('Detected from the content'),
  size: z.number().int().describe('Bytes'),
});

const imageParams = z.object({ projectId: z.string(), file: z.string() });

const imageNotFound = () => new AppError(404, 'NOT_FOUND', 'Image not found');


/** Streams a stored image with conditional GET, ranges and HEAD handled by `send`. */
function sendImage(res: Response, root: string, key: string, contentType: string): Promise<void> {
  return new Promise((resolve, reject) => {
    res.sendFile(
      key,
      {
        root,
        dotfiles: 'deny',
        cacheControl: false,
        // Applied only when the file is found, so a 404 is not cached for a year.
        headers: { 'Content-Type': contentType, 'Cache-Control': IMMUTABLE_CACHE_CONTROL, 'X-Content-Type-Options': 'nosniff' },
      },
      (err) => {
        if (!err || res.headersSent) resolve();
        else if ((err as { status?: number }).status === 404) reject(imageNotFound());
        else reject(err);
      },
    );
  });
}

export function registerUploadRoutes(api: RouteRegistry, deps: AppDeps): void {
  api.add({
    method: 'post',
    path: '/uploads/image',
    tag: 'Uploads',
    summary:
      'Upload an image (multipart form part "file", PNG, JPEG, GIF or WebP recognised by content, at most 10 MB): returns its public URL',
    auth: 'secret',
    response: uploadResponse,
    status: 201,
    handler: async ({ scope, project, req }) => storeImage(scope.em, deps.storage, project.id, await readSingleFile(req, { parts: ['file', 'image'], maxBytes: MAX_IMAGE_BYTES, what: 'the image', tooLarge: imageTooLarge })),
  });

  api.add({
    method: 'get',
    path: '/uploads/:projectId/:file',
    tag: 'Uploads',
    summary: 'An uploaded image (no authentication: images are linked from emails); served here when stored on local disk',
    auth: 'none',
    params: imageParams,
    raw: true,
    handler: async ({ params, res }) => {
      const key = `${params.projectId}/${params.file}`;
      const contentType = keyContentType(key);
      const root = deps.storage.localRoot;
      if (!root || !contentType) throw imageNotFound();
      await sendImage(res, root, key, contentType);
    },
  });
}
