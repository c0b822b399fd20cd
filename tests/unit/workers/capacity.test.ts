import t, { type Test } from 'tap'
import { join } from 'node:path'
import { IDLE_MIB, cpuQuota, idleBytes, memoryLimit, planWorkers } from '../../../gateway/workers/capacity'

// `serve` sizes its workers from the CPU its cgroup allows and refuses a count its memory limit cannot
// hold. Each test builds a cgroup folder (the mount and /proc/self/cgroup) and reads it through the same
// functions that read /sys/fs/cgroup; the file formats are the kernel's (Documentation/admin-guide/
// cgroup-v2.rst: cpu.max "$MAX $PERIOD" or "max $PERIOD", memory.max bytes or "max"; cgroup-v1/
// cpu.cfs_quota_us -1 for none, memory.limit_in_bytes 9223372036854771712 for none).

const MIB = 1024 * 1024
const V1_NO_LIMIT = '9223372036854771712'

/** A cgroup v2 host: the process in /kubepods/pod1/ctr, limits at the pod and container levels. */
function v2(t: Test, pod: Record<string, string>, ctr: Record<string, string>) {
  const dir = t.testdir({
    cgroup: { 'cgroup.controllers': 'cpu memory', kubepods: { pod1: { ...pod, ctr } } },
    'self-cgroup': '0::/kubepods/pod1/ctr\n'
  })
  return { root: join(dir, 'cgroup'), self: join(dir, 'self-cgroup') }
}

t.test(
  'cgroup v2: the CPU quota sets the workers, rounded down, and the smallest limit of the chain binds',
  async t => {
    const paths = v2(t, { 'cpu.max': '300000 100000', 'memory.max': 'max' }, { 'cpu.max': '250000 100000' })
    t.same(cpuQuota(paths), { value: 2.5, file: join(paths.root, 'kubepods/pod1/ctr/cpu.max'), raw: '250000 100000' })
    const plan = planWorkers({ parallelism: 16, paths })
    t.ok(plan.ok)
    if (!plan.ok) return
    t.equal(plan.value.workers, 2, '2.5 CPUs: 2 workers, not one per core of the 16-core node')
    t.match(plan.value.source, /the CPU quota: .*ctr\/cpu\.max: 250000 100000 = 2\.5 CPUs, rounded down/)
    t.equal(plan.value.memoryLimitBytes, null, 'memory.max "max": no limit')
  }
)

t.test(
  'cgroup v2: a quota above the cores this process may use gives one worker per core; below one CPU gives one',
  async t => {
    const wide = v2(t, { 'cpu.max': '800000 100000' }, { 'cpu.max': 'max 100000' })
    const plan = planWorkers({ parallelism: 3, paths: wide })
    t.same(plan.ok && plan.value.workers, 3)
    t.match(plan.ok && plan.value.source, /3 cores this process may run on .*the CPU quota .* allows more/)
    const narrow = v2(t, {}, { 'cpu.max': '50000 100000' })
    t.match(planWorkers({ parallelism: 8, paths: narrow }), { ok: true, value: { workers: 1 } }, '0.5 CPU: one process')
    const none = v2(t, {}, { 'cpu.max': 'max 100000' })
    t.equal(cpuQuota(none), null)
    t.match(planWorkers({ parallelism: 4, paths: none }), { ok: true, value: { workers: 4, source: /no CPU quota/ } })
  }
)

t.test(
  'cgroup v1 (a hybrid host): cpu.cfs_quota_us / cfs_period_us and memory.limit_in_bytes, per controller',
  async t => {
    const dir = t.testdir({
      cgroup: {
        'cpu,cpuacct': {
          'cpu.cfs_quota_us': '-1',
          'cpu.cfs_period_us': '100000',
          docker: { abc: { 'cpu.cfs_quota_us': '400000', 'cpu.cfs_period_us': '100000' } }
        },
        memory: {
          'memory.limit_in_bytes': V1_NO_LIMIT,
          docker: { abc: { 'memory.limit_in_bytes': String(512 * MIB) } }
        },
        unified: {}
      },
      'self-cgroup': '12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n'
    })
    const paths = { root: join(dir, 'cgroup'), self: join(dir, 'self-cgroup') }
    t.equal(cpuQuota(paths)?.value, 4)
    t.equal(memoryLimit(paths)?.value, 512 * MIB)
    const plan = planWorkers({ parallelism: 8, paths })
    t.notOk(plan.ok, '4 workers from the quota need more than 512 MiB: refused, not started to be OOM-killed')
    if (plan.ok) return
    t.match(plan.error, /^4 worker processes \(the CPU quota: .*\) need about 560 MiB before any call/)
    t.match(plan.error, /more than the memory limit of 512 MiB \(.*docker\/abc\/memory\.limit_in_bytes\)/)
    t.match(plan.error, /At most 3 fit: set --workers 3/)
  }
)

t.test(
  'cgroup v1 in a container without a cgroup namespace: the host path is absent, the mount is its own cgroup',
  async t => {
    const dir = t.testdir({
      cgroup: {
        cpu: { 'cpu.cfs_quota_us': '150000', 'cpu.cfs_period_us': '100000' },
        memory: { 'memory.limit_in_bytes': String(1024 * MIB) }
      },
      'self-cgroup': '5:memory:/kubepods/burstable/pod9/c1\n3:cpu:/kubepods/burstable/pod9/c1\n'
    })
    const paths = { root: join(dir, 'cgroup'), self: join(dir, 'self-cgroup') }
    t.match(planWorkers({ parallelism: 8, paths }), { ok: true, value: { workers: 1, memoryLimitBytes: 1024 * MIB } })
  }
)

t.test(
  'explicit --workers and GATEWAY_WORKERS win over the quota, and the memory limit still applies to them',
  async t => {
    const paths = v2(t, { 'memory.max': String(400 * MIB) }, { 'cpu.max': '100000 100000', 'memory.max': 'max' })
    t.match(planWorkers({ explicit: { workers: 2, from: '--workers' }, parallelism: 8, paths }), {
      ok: true,
      value: { workers: 2, source: '--workers', memoryLimitBytes: 400 * MIB }
    })
    const plan = planWorkers({ explicit: { workers: 6, from: 'GATEWAY_WORKERS' }, parallelism: 8, paths })
    t.match(plan, { ok: false, error: /^6 worker processes \(GATEWAY_WORKERS\) need about 784 MiB .* At most 2 fit/ })
    const tiny = v2(t, { 'memory.max': String(64 * MIB) }, {})
    t.match(planWorkers({ explicit: { workers: 1, from: '--workers' }, parallelism: 1, paths: tiny }), {
      ok: false,
      error: /Not even one process fits: raise the memory limit to at least 112 MiB/
    })
  }
)

t.test('no cgroup at all (not Linux, no procfs): the cores, no memory check', async t => {
  const dir = t.testdir({})
  const paths = { root: join(dir, 'nothing'), self: join(dir, 'no-self') }
  t.match(planWorkers({ parallelism: 2, paths }), { ok: true, value: { workers: 2, memoryLimitBytes: null } })
})

t.test('the idle figure: a single process is one worker; N workers add the main process', async t => {
  t.equal(idleBytes(1), IDLE_MIB.worker * MIB)
  t.equal(idleBytes(2), (IDLE_MIB.main + 2 * IDLE_MIB.worker) * MIB)
})
