import type { Config } from '../config';
import { LocalDiskStorage } from './local-disk';
import { S3ImageStorage } from './s3';
import type { ImageStorage } from './storage';

/** S3-compatible storage when S3_BUCKET is set, otherwise DATA_DIR/uploads served by the API. */
export function imageStorageFromConfig(config: Config): ImageStorage {
  return config.s3 ? new S3ImageStorage(config.s3) : new LocalDiskStorage(config.dataDir, config.publicUrl);
}
