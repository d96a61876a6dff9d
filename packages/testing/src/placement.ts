// Where a test process runs: on this machine's loopback, or on a host of a cluster (a network
// namespace, see cluster.ts) with an address of its own.

/** A place to start processes: its address (what others dial) and how a command runs there. */
export interface Placement {
  /** A short name, shown in failure reports. */
  readonly name: string;
  /** The address other hosts (and this test) reach its servers on. */
  readonly address: string;
  /** The command line that runs `command args` there. */
  command(command: string, args: readonly string[]): { command: string; args: string[] };
}

/** This machine, as every single-host test uses it. */
export const loopback: Placement = {
  name: 'local',
  address: '127.0.0.1',
  command: (command, args) => ({ command, args: [...args] }),
};
