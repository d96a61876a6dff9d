import { existsSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { InvalidArgument } from '@dynamo/runtime';

/** The project a graph module belongs to: the build context of its image. */
export interface GraphProject {
  /** The directory holding the lockfile (else the package's): the docker build context. */
  root: string;
  packageManager: 'pnpm' | 'npm' | 'yarn';
  /** The lockfile's name in `root`, if there is one. */
  lockfile: string | undefined;
  /** The module's package directory from `root` ('' when it is the root; a workspace member otherwise). */
  packageDir: string;
  /** The module's path from its package directory. */
  modulePath: string;
}

const lockfiles = [
  ['pnpm-lock.yaml', 'pnpm'],
  ['package-lock.json', 'npm'],
  ['yarn.lock', 'yarn'],
] as const;

const slashed = (from: string, to: string) => relative(from, to).split(sep).join('/');

/** Finds the project of `modulePath`: its nearest package.json, and the nearest lockfile at or above that. */
export function findProject(modulePath: string): GraphProject {
  let packageDir: string | undefined;
  for (let dir = dirname(modulePath); ; dir = dirname(dir)) {
    if (packageDir === undefined && existsSync(join(dir, 'package.json'))) packageDir = dir;
    if (packageDir !== undefined) {
      for (const [file, packageManager] of lockfiles) {
        if (existsSync(join(dir, file)))
          return { root: dir, packageManager, lockfile: file, packageDir: slashed(dir, packageDir), modulePath: slashed(packageDir, modulePath) };
      }
    }
    if (dirname(dir) === dir) break;
  }
  if (packageDir === undefined) throw new InvalidArgument(`${modulePath}: no package.json above it; the image is built from the module's npm project`);
  return { root: packageDir, packageManager: 'npm', lockfile: undefined, packageDir: '', modulePath: slashed(packageDir, modulePath) };
}

/** Where the module's package sits in the image, under `workingDir`. */
export function imagePackageDir(project: GraphProject, workingDir: string): string {
  return project.packageDir === '' ? workingDir : `${workingDir.replace(/\/$/, '')}/${project.packageDir}`;
}

const install: Record<GraphProject['packageManager'], string> = {
  pnpm: 'corepack enable && pnpm install --frozen-lockfile --prod',
  npm: 'npm ci --omit=dev',
  yarn: 'corepack enable && yarn install --frozen-lockfile --production',
};

/**
 * The Dockerfile of a graph's image: the project's production dependencies installed from its
 * lockfile, then its sources, with `dynamo-serve <graph>` as the default command (each
 * Kubernetes component adds `--service-name`).
 */
export function graphDockerfile(project: GraphProject, graphRef: string, baseImage: string, workingDir: string): string {
  return [
    `# The image of the Dynamo graph ${graphRef}, written by dynamo-deploy.`,
    '# Build it with the project root as context (list node_modules in its .dockerignore):',
    '#   docker build -f <this file> -t <image> <project root>',
    `FROM ${baseImage}`,
    `WORKDIR ${workingDir}`,
    // The whole context before installing: a workspace's lockfile needs every member's package.json.
    'COPY . .',
    `RUN ${project.lockfile ? install[project.packageManager] : 'npm install --omit=dev'}`,
    ...(project.packageDir === '' ? [] : [`WORKDIR ${imagePackageDir(project, workingDir)}`]),
    'ENV NODE_ENV=production DYN_DISCOVERY_BACKEND=etcd DYN_REQUEST_PLANE=nats',
    `CMD ["node_modules/.bin/dynamo-serve", ${JSON.stringify(graphRef)}]`,
    '',
  ].join('\n');
}
