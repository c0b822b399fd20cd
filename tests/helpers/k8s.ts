import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parseAllDocuments } from 'yaml'

/** A Kubernetes object as written in a manifest or rendered by kustomize. */
export type K8sObject = {
  apiVersion: string
  kind: string
  metadata: { name: string; [k: string]: any }
  [k: string]: any
}

/**
 * The model package of each API group and version the manifests use: kubernetes-models (the Kubernetes
 * OpenAPI schema, compiled) and @kubernetes-models/prometheus-operator (the ServiceMonitor CRD's schema).
 */
const MODELS: Record<string, string> = {
  v1: 'kubernetes-models/v1',
  'apps/v1': 'kubernetes-models/apps/v1',
  'policy/v1': 'kubernetes-models/policy/v1',
  'autoscaling/v2': 'kubernetes-models/autoscaling/v2',
  'networking.k8s.io/v1': 'kubernetes-models/networking.k8s.io/v1',
  'monitoring.coreos.com/v1': '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1'
}

/**
 * Validate one object against its API schema: types, required fields, enums and formats (the schema's
 * own rules; like the API server's OpenAPI validation it does not refuse unknown fields). Null when
 * valid, else what is wrong.
 */
export function schemaProblem(o: K8sObject): string | null {
  const module = MODELS[o.apiVersion]
  if (module === undefined) return `no schema known for apiVersion ${o.apiVersion}`
  const Model = (require(module) as Record<string, new (o: unknown) => { validate: () => void }>)[o.kind]
  if (Model === undefined) return `no kind ${o.kind} in ${o.apiVersion}`
  try {
    new Model(o).validate()
    return null
  } catch (err) {
    return (err as Error).message
  }
}

/** Every object of a YAML stream (kustomize output, or a manifest file with `---` documents). */
export function objectsOf(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map(d => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null && typeof o === 'object' && typeof o.kind === 'string')
}

/** The files a folder's kustomization.yaml uses as patches (partial objects, not manifests). */
function patchesOf(dir: string): Set<string> {
  type Kustomization = { patches?: { path?: string }[]; patchesStrategicMerge?: string[] }
  let k: Kustomization | null = null
  try {
    k = (objectsOf(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'))[0] ?? null) as unknown as Kustomization | null
  } catch {
    return new Set()
  }
  return new Set([
    ...(k?.patches ?? []).flatMap((x: { path?: string }) => (x.path !== undefined ? [x.path] : [])),
    ...(k?.patchesStrategicMerge ?? [])
  ])
}

/** Every Kubernetes object of the manifests under a folder (kustomizations and patches left out), with its file. */
export function manifestsUnder(dir: string, root: string): { file: string; object: K8sObject }[] {
  const out: { file: string; object: K8sObject }[] = []
  const walk = (d: string): void => {
    const patches = patchesOf(d)
    for (const n of readdirSync(d).sort()) {
      const p = join(d, n)
      if (statSync(p).isDirectory()) walk(p)
      else if (/\.ya?ml$/.test(n) && !patches.has(n))
        for (const object of objectsOf(readFileSync(p, 'utf8')))
          if (object.apiVersion !== undefined && object.kind !== 'Kustomization')
            out.push({ file: relative(root, p), object })
    }
  }
  walk(dir)
  return out
}
