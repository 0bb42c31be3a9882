import { DeleteObjectsCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { Config } from '../config';
import { checkInboundKey, IMMUTABLE_CACHE_CONTROL, inboundPrefix, projectPrefix, type ImageStorage } from './storage';

type S3Config = NonNullable<Config['s3']>;

/**
 * Images in an S3-compatible bucket (AWS, MinIO, R2, …), fetched by readers straight from the
 * bucket or from S3_PUBLIC_URL (a CDN in front of it). The bucket must allow public reads of
 * its images; the service only writes. Received messages go under `inbound/`, which that public
 * read must leave out (docs/configuration.md).
 */
export class S3ImageStorage implements ImageStorage {
  private readonly client: S3Client;
  private readonly baseUrl: string;

  constructor(private readonly s3: S3Config) {
    this.client = new S3Client({
      region: s3.region,
      endpoint: s3.endpoint,
      forcePathStyle: s3.forcePathStyle,
      // Unset keys: the SDK's own chain (AWS_* variables, instance or task role).
      credentials: s3.accessKeyId && s3.secretAccessKey ? { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } : undefined,
      // Checksums only where S3 requires them: the CRC32 headers the SDK adds to every upload by
      // default are refused by some S3-compatible servers, and the body is small and sent whole.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    this.baseUrl = s3.publicUrl ?? bucketUrl(s3);
  }

  async put(key: string, bytes: Buffer, contentType: string): Promise<string> {
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.s3.bucket,
        Key: key,
        Body: bytes,
        ContentType: contentType,
        ContentLength: bytes.length,
        CacheControl: IMMUTABLE_CACHE_CONTROL,
      }),
    );
    return `${this.baseUrl}/${key}`;
  }

  async keepInbound(key: string, raw: Buffer): Promise<void> {
    await this.client.send(
      new PutObjectCommand({ Bucket: this.s3.bucket, Key: checkInboundKey(key), Body: raw, ContentType: 'message/rfc822', ContentLength: raw.length }),
    );
  }

  async removeProject(projectId: string): Promise<void> {
    await this.removePrefix(projectPrefix(projectId));
    await this.removePrefix(inboundPrefix(projectId));
  }

  /** Lists a prefix a page (≤ 1,000 keys) at a time and deletes each page in one request. */
  private async removePrefix(prefix: string): Promise<void> {
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.s3.bucket, Prefix: prefix, ContinuationToken: token }));
      const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
      if (keys.length) {
        const result = await this.client.send(new DeleteObjectsCommand({ Bucket: this.s3.bucket, Delete: { Objects: keys, Quiet: true } }));
        if (result.Errors?.length) throw new Error(`The bucket kept ${result.Errors.length} of the project's images: ${result.Errors[0]!.Message}`);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }
}

/** The bucket's own URL: `<endpoint>/<bucket>` in path style, `<bucket>.<endpoint host>` otherwise. */
export function bucketUrl(s3: Pick<S3Config, 'bucket' | 'endpoint' | 'region' | 'forcePathStyle'>): string {
  const endpoint = new URL(s3.endpoint ?? `https://s3.${s3.region}.amazonaws.com`);
  const base = endpoint.pathname.replace(/\/+$/, '');
  if (s3.forcePathStyle) return `${endpoint.origin}${base}/${s3.bucket}`;
  return `${endpoint.protocol}//${s3.bucket}.${endpoint.host}${base}`;
}
