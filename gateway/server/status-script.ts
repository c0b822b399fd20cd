/**
 * The status page's script (server/status-page.ts), served as /admin/status.js. Plain browser JavaScript
 * in a string: no build step, nothing fetched from elsewhere. Every value from the API goes into the page
 * as text (`textContent`), never as HTML. The `data-*` attributes are what the browser test reads.
 */
export const STATUS_SCRIPT = `'use strict'
;(function () {
  var EVERY_MS = 2000
  var HEADERS = { accept: 'application/json', 'x-requested-with': 'assist-gateway' }

  function get(path) {
    return fetch(path, { headers: HEADERS, credentials: 'same-origin', cache: 'no-store' }).then(function (r) {
      if (r.status === 404) return null
      if (!r.ok) throw new Error(path + ' answered ' + r.status)
      return r.json()
    })
  }

  function el(tag, attrs, children) {
    var e = document.createElement(tag)
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] === undefined || attrs[k] === null) return
      if (k === 'class') e.className = attrs[k]
      else if (k.indexOf('data-') === 0) e.setAttribute(k, String(attrs[k]))
      else e[k] = attrs[k]
    })
    ;(children || []).forEach(function (c) {
      e.appendChild(typeof c === 'object' && c !== null ? c : document.createTextNode(c === undefined || c === null ? '' : String(c)))
    })
    return e
  }

  function cell(v, cls) {
    return el('td', { class: cls }, [v])
  }
  function num(v) {
    return cell(v === undefined || v === null ? '' : v, 'num')
  }

  function table(head, rows, empty) {
    if (rows.length === 0) return el('p', { class: 'muted' }, [empty])
    return el('table', {}, [
      el('thead', {}, [el('tr', {}, head.map(function (h) { return el('th', {}, [h]) }))]),
      el('tbody', {}, rows)
    ])
  }

  function ago(iso) {
    if (!iso) return ''
    var s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000))
    if (s < 120) return s + ' s ago'
    if (s < 7200) return Math.round(s / 60) + ' min ago'
    return Math.round(s / 3600) + ' h ago'
  }

  function fill(id, node) {
    var host = document.getElementById(id)
    host.replaceChildren(node)
  }

  function renderWorkers(w) {
    if (w === null) return fill('workers', el('p', { class: 'muted' }, ['one process (no workers)']))
    fill('workers', table(['worker', 'state', 'pid', 'restarts'], w.workers.map(function (x) {
      return el('tr', { 'data-worker': x.worker, 'data-state': x.up ? 'up' : 'down' }, [
        cell(x.worker), cell(x.up ? 'up' : 'down', 'state'), num(x.pid), num(x.restarts)
      ])
    }), 'no workers'))
  }

  function callsByRoute(calls) {
    var out = {}
    calls.forEach(function (c) {
      if (c.state !== 'PARKED') out[c.route] = (out[c.route] || 0) + 1
    })
    return out
  }

  function renderRoutes(up, calls) {
    var live = callsByRoute(calls)
    var parts = up.routes.map(function (r) {
      var streams = r.replicas.reduce(function (n, p) { return n + p.fleetStreams }, 0)
      var title = el('h3', { 'data-route': r.route }, [
        r.route, el('span', { class: 'muted' }, [' · ' + r.vendor + ' · probe ' + r.probe +
          ' · calls in progress ' + (live[r.route] || 0) + ' · streams (fleet) ' + streams])
      ])
      var rows = r.replicas.map(function (p) {
        return el('tr', { 'data-route': r.route, 'data-replica': p.name, 'data-state': p.state }, [
          cell(p.name), cell(p.state, 'state'), cell(p.reason), cell(ago(p.since)),
          num(p.activeStreams), num(p.fleetStreams), num(p.inFlight), num(p.consecutiveFailures), num(p.ejections)
        ])
      })
      var t = table(['replica', 'state', 'reason (last failure)', 'since', 'streams here', 'streams fleet',
        'text in flight', 'failures in a row', 'ejections'], rows, 'no replicas')
      return el('div', { class: 'route' }, [title, t])
    })
    fill('routes', el('div', {}, parts.length > 0 ? parts : [el('p', { class: 'muted' }, ['no routes'])]))
  }

  function renderCalls(answer) {
    var rows = answer.calls.map(function (c) {
      return el('tr', { 'data-contact': c.contactId, 'data-route': c.route, 'data-state': c.state }, [
        cell(c.contactId), cell(c.perspective), cell(c.route), cell(c.state), cell(c.replica),
        cell(c.worker === null ? '' : c.worker), cell(ago(c.startedAt)), num(c.framesFromPlatform),
        num(c.failovers), num(c.gapMs), num(c.lastFrameAgeMs)
      ])
    })
    var t = table(['contact', 'perspective', 'route', 'state', 'replica', 'worker', 'started', 'frames',
      'failovers', 'gap ms', 'last frame ms'], rows, 'no call in progress')
    fill('calls', el('div', {}, answer.more ? [t, el('p', { class: 'muted' }, ['more calls than shown'])] : [t]))
  }

  function renderRecent(recent) {
    fill('changes', table(['when', 'route', 'what', 'replica', 'from', 'detail', 'worker'],
      recent.changes.map(function (e) {
        return el('tr', { 'data-kind': e.kind, 'data-route': e.route }, [
          cell(ago(e.at)), cell(e.route),
          cell(e.kind + (e.code ? ' ' + e.code : ''), e.kind === 'up' || e.kind === 'failover' && !e.code ? 'ok' : 'bad'),
          cell(e.upstream), cell(e.from), cell(e.detail), cell(e.worker)
        ])
      }), 'none since the start'))
    fill('refusals', table(['when', 'hook', 'route', 'code', 'detail', 'worker'],
      recent.refusals.map(function (e) {
        return el('tr', { 'data-code': e.code }, [
          cell(ago(e.at)), cell(e.hook), cell(e.route), cell(e.code), cell(e.detail), cell(e.worker)
        ])
      }), 'none since the start'))
  }

  function status(state, text) {
    var live = document.getElementById('live')
    live.setAttribute('data-state', state)
    live.textContent = text
  }

  function refresh() {
    return Promise.all([get('/admin/upstreams'), get('/admin/calls?all'), get('/admin/recent'), get('/admin/workers')])
      .then(function (r) {
        var up = r[0]
        document.getElementById('instance').textContent = 'instance ' + up.instance + ' · store ' + up.store.kind +
          (up.store.up ? ' (up)' : ' (DOWN)') + ' · parked sessions ' + up.parkedSessions
        renderWorkers(r[3])
        renderRoutes(up, r[1] ? r[1].calls : [])
        renderCalls(r[1] || { calls: [], more: false })
        renderRecent(r[2] || { changes: [], refusals: [] })
        status('ok', 'live · updated ' + new Date().toLocaleTimeString())
      })
      .catch(function (err) {
        status('error', 'not updating: ' + err.message)
      })
  }

  function loop() {
    refresh().then(function () { setTimeout(loop, EVERY_MS) })
  }
  document.addEventListener('DOMContentLoaded', loop)
})()
`
