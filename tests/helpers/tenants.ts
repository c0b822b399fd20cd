// Two tenants, acme and globex, sharing route `assist` of the bundled json-events vendor (vendor-formats.md,
// "json-events"): the config the issue-33 tests start serve with, said once.

/** Each tenant's credentials, as the environment the gateway reads them from (`${VAR}` in the config). */
export const TENANT_ENV = {
  ACME_AUDIO: 'acme-audio-credential-0123',
  ACME_TEXT: 'acme-text-credential-0123',
  GLOBEX_AUDIO: 'globex-audio-credential-4567',
  GLOBEX_TEXT: 'globex-text-credential-4567'
}

/** acme with `acmeLimits` and globex without limits, on route `assist` of the vendor at `vendor`. */
export function twoTenants(
  vendor: { url: string; httpUrl: string },
  acmeLimits: Record<string, number>,
  extra: Record<string, unknown> = {}
): Record<string, unknown> {
  return {
    ...extra,
    tenants: {
      acme: { credentials: { audio: ['${ACME_AUDIO}'], text: ['${ACME_TEXT}'] }, limits: acmeLimits },
      globex: { credentials: { audio: ['${GLOBEX_AUDIO}'], text: ['${GLOBEX_TEXT}'] } }
    },
    routes: {
      assist: {
        mapping: 'mappings/json-events.yaml',
        tenants: ['acme', 'globex'],
        upstreams: [{ name: 'r0', audio: vendor.url, text: vendor.httpUrl }]
      }
    }
  }
}
