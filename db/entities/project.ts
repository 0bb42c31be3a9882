import { EntitySchema } from '@mikro-orm/core';

export interface Project {
  id: string;
  name: string;
  /** SHA-256 hex of the secret key: a database dump does not hand out working keys. */
  secretKeyHash: string;
  publicKeyHash: string;
  /** First characters of each key, so people can tell keys apart without the key itself. */
  secretKeyPreview: string;
  publicKeyPreview: string;
  disabled: boolean;
  createdAt: Date;
  updatedAt: Date;
}

export const ProjectSchema = new EntitySchema<Project>({
  name: 'Project',
  tableName: 'projects',
  properties: {
    id: { type: 'string', primary: true },
    name: { type: 'string' },
    secretKeyHash: { type: 'string', unique: true },
    publicKeyHash: { type: 'string', unique: true },
    secretKeyPreview: { type: 'string' },
    publicKeyPreview: { type: 'string' },
    disabled: { type: 'boolean', default: false },
    createdAt: { type: 'Date', onCreate: () => new Date() },
    updatedAt: { type: 'Date', onCreate: () => new Date(), onUpdate: () => new Date() },
  },
});
