#!/usr/bin/env node
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { formatHelp, type Flags, InvalidArgument, toDynamoException } from '@dynamo/runtime';
import { stringify } from 'yaml';
import { z } from 'zod';

import { findProject, graphDockerfile, imagePackageDir } from '../deploy/dockerfile.js';
import { componentName, graphManifest } from '../deploy/manifest.js';
import { parseGraphRef } from '../graph.js';
import { deepMerge } from '../serve-config.js';
import { parseGraphArgs, resolveGraph } from './graph-args.js';

const flags = {
  image: {
    schema: z.string({ error: 'give the image the graph runs in (--image IMAGE or DYNAMO_IMAGE)' }).min(1),
    description: 'Image of every service without its own @service({ image })',
    env: 'DYNAMO_IMAGE',
    placeholder: 'IMAGE',
  },
  configFile: {
    schema: z.string().min(1).optional(),
    description: 'YAML config: service class name → its config (-f); DYN_DEPLOYMENT_CONFIG replaces it',
    placeholder: 'FILE',
  },
  name: { schema: z.string().min(1).optional(), description: "The DynamoGraphDeployment's name (default: the entry class, lowercased)", placeholder: 'NAME' },
  namespace: { schema: z.string().min(1).optional(), description: "Kubernetes namespace of the resource (default: kubectl's current one)", placeholder: 'NS' },
  outputDir: {
    schema: z.string().min(1).optional(),
    description: 'Where to write dynamo-graph-deployment.yaml and Dockerfile (-o; default: deploy/<name>)',
    placeholder: 'DIR',
  },
  baseImage: { schema: z.string().min(1).default('node:20-bookworm-slim'), description: 'Base image of the Dockerfile', placeholder: 'IMAGE' },
  workingDir: {
    schema: z.string().regex(/^\//, 'must be an absolute path').default('/app'),
    description: 'Where the project (the build context) sits in the image',
    placeholder: 'DIR',
  },
  dryRun: { schema: z.boolean().default(false), boolean: true, description: 'Print the manifest and Dockerfile instead of writing them' },
  apply: { schema: z.boolean().default(false), boolean: true, description: 'Run kubectl apply on the written manifest' },
} satisfies Flags;

const usage = 'dynamo-deploy <module>#<Class> --image IMAGE [-f config.yaml] [--Class.key=value ...] [options]';
const summary = `Writes the Kubernetes form of a graph of @dynamo/sdk services for Dynamo's operator: a
DynamoGraphDeployment (nvidia.com/v1beta1) with one component per service (replicas = workers,
resources as requests and limits, each pod running dynamo-serve --service-name on etcd + NATS) and
a Dockerfile for the graph's image. The manifest is checked against the resource's rules first.`;

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseGraphArgs(flags, argv, process.env, { '-f': '--config-file', '-o': '--output-dir' });
  } catch (err) {
    process.stderr.write(`dynamo-deploy: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(formatHelp(usage, summary, flags));
    return 0;
  }
  const f = parsed.values;
  let files: Array<[string, string]>;
  let manifestPath: string;
  let project;
  let outDir: string;
  try {
    if (f.dryRun && f.apply) throw new InvalidArgument('--dry-run and --apply exclude each other');
    const { graph, services, fileConfig, warnings } = await resolveGraph(parsed.ref, f.configFile, parsed.overrides);
    for (const warning of warnings) process.stderr.write(`dynamo-deploy: warning: ${warning}\n`);
    project = findProject(parseGraphRef(parsed.ref).modulePath);
    const graphRef = `${project.modulePath}#${graph.entry.name}`;
    const name = f.name ?? componentName(graph.entry.name);
    const manifest = graphManifest(graph, services, {
      name,
      namespace: f.namespace,
      image: f.image,
      graphRef,
      workingDir: imagePackageDir(project, f.workingDir),
      deploymentConfig: deepMerge(fileConfig, parsed.overrides),
    });
    outDir = resolve(f.outputDir ?? join('deploy', name));
    manifestPath = join(outDir, 'dynamo-graph-deployment.yaml');
    files = [
      [manifestPath, stringify(manifest, { lineWidth: 0 })],
      [join(outDir, 'Dockerfile'), graphDockerfile(project, graphRef, f.baseImage, f.workingDir)],
    ];
  } catch (err) {
    process.stderr.write(`dynamo-deploy: ${toDynamoException(err).message}\n`);
    return 2;
  }
  if (f.dryRun) {
    for (const [path, text] of files) process.stdout.write(`# ${relative(process.cwd(), path)}\n${text}\n`);
    return 0;
  }
  mkdirSync(outDir, { recursive: true });
  for (const [path, text] of files) writeFileSync(path, text);
  const dockerfile = relative(process.cwd(), files[1]![0]) || 'Dockerfile';
  process.stdout.write(
    `wrote ${relative(process.cwd(), manifestPath)} and ${dockerfile}\nbuild the image: docker build -f ${dockerfile} -t ${f.image} ${relative(process.cwd(), project.root) || '.'}\n`,
  );
  if (!f.apply) {
    process.stdout.write(`then: kubectl apply -f ${relative(process.cwd(), manifestPath)}\n`);
    return 0;
  }
  const applied = spawnSync('kubectl', ['apply', '-f', manifestPath], { stdio: 'inherit' });
  if (applied.error) {
    process.stderr.write(
      `dynamo-deploy: --apply: kubectl could not run (${(applied.error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found on PATH' : applied.error.message}); the manifest is written, apply it yourself\n`,
    );
    return 1;
  }
  return applied.status ?? 1;
}

process.exitCode = await main(process.argv.slice(2));
