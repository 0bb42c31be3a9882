import { useQuery } from '@tanstack/react-query';
import { Link } from 'react-router';
import { domainsQuery } from '../api/domains';

/** The hint under a From address: which of the project's domains may send now, so the address is chosen on one of them. */
export function SenderHint({ projectId }: { projectId: string }) {
  const domains = useQuery({ ...domainsQuery(projectId), staleTime: 60_000 });
  if (!domains.data) return <>On a verified domain of the project.</>;
  const usable = domains.data.filter((d) => d.sending.allowed).map((d) => d.domain);
  if (usable.length === 0) {
    return (
      <>
        No domain can send yet: <Link to={`/p/${projectId}/domains`}>add one</Link>.
      </>
    );
  }
  return (
    <>
      On {usable.length === 1 ? 'the domain' : 'one of'} {usable.join(', ')}.
    </>
  );
}
