/** What a pod worker is given by the runner: the API, the host's tools, its directories and settings. */
import type { V1Pod } from '@kubernetes/client-node';
import type { Api } from './api';
import type { ImageConfig } from './images';
import type { HostTools } from './process';

export interface RunnerContext {
  api: Api;
  tools: HostTools;
  nodeName: string;
  podsDir: string;
  logsDir: string;
  claimsDir: string;
  /** Directories no mount may overlap (the runner's own). */
  ownDirs: string[];
  protectedPaths: string[];
  capacity: Record<string, string>;
  serviceEnv: Record<string, string>;
  backoffInitialMs: number;
  backoffMaxMs: number;
  volumeRefreshMs: number;
  /** The image config, or a string: why the image cannot be "pulled". */
  image(image: string): ImageConfig | string;
  /** Contents of the pod's /etc/hosts. */
  hostsFile(pod: V1Pod): Promise<string>;
  /** Output lines, when streaming. */
  stream?: (prefix: string, chunk: Buffer) => void;
  log(msg: string): void;
  event(pod: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string, fieldPath?: string): void;
  /** The test's rewrite of the pod spec before it runs (ports, commands). */
  transformPod?: (pod: V1Pod) => V1Pod;
}
