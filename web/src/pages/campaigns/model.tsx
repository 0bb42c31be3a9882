import type { Segment } from '../../api/segments';

/** Campaigns as GET /campaigns/:id answers (api/schemas/campaigns.ts). */
export type CampaignStatus = 'DRAFT' | 'SCHEDULED' | 'SENDING' | 'SENT' | 'CANCELLED';
export type CampaignType = 'MARKETING' | 'TRANSACTIONAL';

export interface CampaignStats {
  totalRecipients: number;
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  complained: number;
  unsubscribed: number;
  openRate: number;
  clickRate: number;
  bounceRate: number;
}

export interface Campaign {
  id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  type: CampaignType;
  segmentId: string | null;
  status: CampaignStatus;
  scheduledFor: string | null;
  startedAt: string | null;
  sentAt: string | null;
  cancelledAt: string | null;
  totalRecipients: number;
  stats: CampaignStats;
  createdAt: string;
  updatedAt: string;
}

export const STATUS_LABEL: Record<CampaignStatus, string> = {
  DRAFT: 'Draft',
  SCHEDULED: 'Scheduled',
  SENDING: 'Sending',
  SENT: 'Sent',
  CANCELLED: 'Cancelled',
};

export function StatusBadge({ status }: { status: CampaignStatus }) {
  const tone = status === 'SENT' ? ' badge-ok' : status === 'CANCELLED' ? ' badge-danger' : status === 'SENDING' ? ' badge-active' : '';
  return <span className={`badge${tone}`}>{STATUS_LABEL[status]}</span>;
}

export function audienceName(segmentId: string | null, segments: Segment[] | undefined): string {
  if (!segmentId) return 'Everyone subscribed';
  return segments?.find((s) => s.id === segmentId)?.name ?? 'A segment';
}
