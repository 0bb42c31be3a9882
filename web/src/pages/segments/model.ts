/** Shapes of the segment endpoints only the segment pages read (api/schemas/segments.ts). */
import type { Contact } from '../../api/contacts';
import type { SegmentType } from '../../api/segments';

export interface SegmentPreview {
  count: number;
  sample: Contact[];
}

export const TYPE_LABELS: Record<SegmentType, string> = { DYNAMIC: 'Dynamic', STATIC: 'Static' };
