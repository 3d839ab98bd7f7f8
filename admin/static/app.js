// Outbox event admin. Plain browser JavaScript, no dependencies, no build step.
//
// Every stored string (IDs, types, errors, headers, payloads, audit entries) is inserted
// with textContent or as an attribute value, never as HTML. The API is called with URLs
// relative to this page, so the admin works under any mount prefix.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  // The token comes from the URL fragment (#token=..., which never reaches a server or
  // its logs) or from the sign-in form, and is kept in this tab's sessionStorage, one
  // per mount point.
  const tokenKey = 'outbox-admin-token:' + location.pathname;
  let token = sessionStorage.getItem(tokenKey) || '';
  (function takeTokenFromFragment() {
    const m = /(?:^|&)token=([^&]*)/.exec(location.hash.slice(1));
    if (!m) return;
    try {
      token = decodeURIComponent(m[1]);
    } catch (_) {
      token = m[1];
    }
    sessionStorage.setItem(tokenKey, token);
    // Drop the token from the address bar and the history.
    history.replaceState(null, '', location.pathname + location.search);
  })();

  // The lists, one per status: the API's name, the stored status, what the page calls
  // them, whether they are in the order they finished (newest first by default), and
  // the changes their events allow.
  const LISTS = {
    new: { status: 'NEW', noun: 'pending', finished: false, actions: ['discard'] },
    retry: { status: 'RETRY', noun: 'retrying', finished: false, actions: ['discard'] },
    waiting: { status: 'WAITING', noun: 'waiting', finished: false, actions: ['discard'] },
    dead: { status: 'DEAD', noun: 'dead', finished: false, actions: ['replay', 'discard', 'delete'] },
    done: { status: 'DONE', noun: 'done', finished: true, actions: [] },
    fallback: { status: 'FALLBACK', noun: 'fallback', finished: true, actions: [] },
    discarded: { status: 'DISCARDED', noun: 'discarded', finished: true, actions: [] },
  };
  const STATUS_ORDER = ['NEW', 'RETRY', 'WAITING', 'DEAD', 'DONE', 'FALLBACK', 'DISCARDED'];
  const VIEW_OF_STATUS = Object.fromEntries(Object.entries(LISTS).map(([v, l]) => [l.status, v]));
  const FILTER_KEYS = ['event_type', 'aggregate_type', 'aggregate_id', 'listener', 'order_key', 'error', 'from', 'to', 'blocking'];
  const FILTER_INPUTS = {
    event_type: 'f-event-type', aggregate_type: 'f-aggregate-type', aggregate_id: 'f-aggregate-id',
    listener: 'f-listener', order_key: 'f-order-key', error: 'f-error', from: 'f-from', to: 'f-to',
    blocking: 'f-blocking', // a checkbox: '1' or ''
  };
  // BLOCKING_VIEWS are the lists the blocking filter applies to: only a RETRY or DEAD
  // event holds its order key.
  const BLOCKING_VIEWS = ['retry', 'dead'];

  const state = {
    view: 'dead',
    // Filter values as typed; from and to are datetime-local values (local time).
    filter: emptyFilter(),
    newest: false,
    pages: [''], // the after value of each page visited so far
    page: 0,
    next: '',
    picked: new Set(), // IDs ticked on this page
    selected: '', // the event shown in the details
    overview: null,
    auditNext: '',
    seq: 0, // the latest list request; older answers are dropped
    countSeq: 0, // the latest dead-event count request, likewise
    overviewSeq: 0, // the latest overview request, likewise
    subsSeq: 0, // the latest subscriptions request, likewise
    refreshSeq: 0, // the latest refresh: it alone ends the busy state
  };

  function emptyFilter() {
    return Object.fromEntries(FILTER_KEYS.map((k) => [k, '']));
  }

  class APIError extends Error {
    constructor(status, body) {
      const e = body && body.error ? body.error : null;
      super(e && e.message ? e.message : status ? 'HTTP ' + status : 'no answer from the server');
      this.status = status;
      this.code = e ? e.code : '';
    }
  }

  async function api(path, method, body) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = { method: method || 'GET', headers, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (_) {
      throw new APIError(0, null); // the server did not answer: down, restarting, or unreachable
    }
    let data = null;
    try {
      data = await res.json();
    } catch (_) {
      data = null;
    }
    if (res.status === 401) {
      showLogin(token ? 'The token was not accepted: it may be from an earlier start of the service. ' +
        'Open the admin URL it printed at its latest start, or paste its current token.' : '');
      throw new APIError(401, data);
    }
    if (!res.ok) throw new APIError(res.status, data);
    return data;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
    const s = q.toString();
    return s ? '?' + s : '';
  }

  function eventPath(id) {
    return 'api/dead-events/' + encodeURIComponent(id);
  }

  // ---- rendering helpers: text only ----

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function button(text, cls, action) {
    const b = el('button', text, cls);
    b.type = 'button';
    if (action) b.dataset.action = action;
    return b;
  }

  function ago(iso) {
    const s = (Date.now() - Date.parse(iso)) / 1000;
    return s < 0 ? 'in ' + duration(-s) : duration(s) + ' ago';
  }

  function duration(s) {
    if (s < 60) return Math.round(s) + 's';
    if (s < 3600) return Math.round(s / 60) + 'm';
    if (s < 86400) return Math.round(s / 3600) + 'h';
    return Math.round(s / 86400) + 'd';
  }

  // when shows a timestamp in local time with its distance from now; null is '—'.
  function when(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    const pad = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' (' + ago(iso) + ')';
  }

  // num writes a count with thousands separators.
  function num(n) {
    return Number(n || 0).toLocaleString('en-US');
  }

  function plural(n, word) {
    return num(n) + ' ' + word + (n === 1 ? '' : 's');
  }

  // bounded shows a count that stopped after the server's bound (atLeast: there are n or
  // more) as "10,000+".
  function bounded(n, atLeast) {
    return num(n) + (atLeast ? '+' : '');
  }

  // atLeastText says that a count stopped after limit events of its list: n or more
  // (what follows the noun, such as a filter, in suffix).
  function atLeastText(n, noun, limit, suffix) {
    return 'At least ' + plural(n, noun) + (suffix || '') + ' (counted among the first ' + num(limit) + ' of the list)';
  }

  // countOf is the overview's count of a status, as bounded shows it.
  function countOf(o, status) {
    return bounded(o.counts[status], o.at_least && o.at_least[status]);
  }

  // isoOf turns a datetime-local value (local time) into RFC 3339 UTC; '' stays ''.
  function isoOf(local) {
    if (!local) return '';
    const d = new Date(local);
    return isNaN(d) ? '' : d.toISOString();
  }

  function filterText(f) {
    const parts = [];
    if (f.event_type) parts.push('event type "' + f.event_type + '"');
    if (f.aggregate_type) parts.push('aggregate type "' + f.aggregate_type + '"');
    if (f.aggregate_id) parts.push('aggregate ID "' + f.aggregate_id + '"');
    if (f.listener) parts.push('listener "' + f.listener + '"');
    if (f.order_key) parts.push('order key "' + f.order_key + '" (in the key\'s order)');
    if (f.blocking && BLOCKING_VIEWS.includes(state.view)) parts.push('waiting events of their key behind them');
    if (f.error) parts.push('an error containing "' + f.error + '"');
    if (f.from) parts.push('from ' + f.from.replace('T', ' '));
    if (f.to) parts.push('before ' + f.to.replace('T', ' '));
    return parts.length ? ' with ' + parts.join(' and ') : '';
  }

  // deadFilterOnly reports whether the filter holds only what the dead-event count and
  // replay-all routes take: event type, aggregate type and listener.
  function deadFilterOnly(f) {
    return !f.aggregate_id && !f.order_key && !f.blocking && !f.error && !f.from && !f.to;
  }

  let toastTimer = 0;
  function toast(text, kind) {
    const t = $('toast');
    t.textContent = text;
    t.className = 'toast ' + (kind || 'ok');
    t.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.hidden = true; }, 6000);
  }

  function report(err) {
    if (err instanceof APIError && err.status === 401) return; // the sign-in form is shown
    toast(err.message || String(err), 'bad');
  }

  // explain says what went wrong with a request, and what to do about it.
  function explain(err) {
    if (!(err instanceof APIError)) return 'The page failed: ' + (err.message || String(err)) + '. Reload it.';
    if (err.status === 0) {
      return 'Cannot reach the outbox admin API: the service is down, restarting or unreachable. ' +
        'Retry when it is back.';
    }
    if (err.status >= 500) {
      return 'The outbox admin API failed (HTTP ' + err.status + ': ' + err.message + '). ' +
        'The service\'s log says why (often its database is unreachable); retry when it is fixed.';
    }
    return 'The outbox admin API refused the request (HTTP ' + err.status + ': ' + err.message + ').';
  }

  // ---- views ----

  // showStatus shows the loading state (error false) or an error with a Retry button
  // above the page; hideStatus removes it.
  function showStatus(text, error) {
    $('status').hidden = false;
    $('status').classList.toggle('error', !!error);
    $('status').setAttribute('role', error ? 'alert' : 'status');
    $('status-text').textContent = text;
    $('status-retry').hidden = !error;
  }

  function hideStatus() {
    $('status').hidden = true;
  }

  function showLogin(message) {
    hideStatus();
    $('app').hidden = true;
    $('sign-out').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('token').focus();
  }

  function showApp() {
    $('login').hidden = true;
    $('app').hidden = false;
    $('sign-out').hidden = !token;
  }

  // ---- overview: the chips in the bar, the tabs' counts, the per-type table ----

  async function loadOverview() {
    const seq = ++state.overviewSeq;
    const o = await api('api/overview');
    if (seq !== state.overviewSeq) return; // a later request owns the overview
    state.overview = o;
    const ul = $('overview');
    ul.replaceChildren();
    for (const name of ['DEAD', 'RETRY', 'NEW', 'DONE']) {
      const li = el('li', null, 'chip status-' + name.toLowerCase());
      li.append(el('span', name, 'label'), el('span', countOf(o, name), 'value'));
      li.dataset.status = name;
      ul.append(li);
    }
    // Final states besides DONE and DEAD, when the table has any.
    for (const [name, title] of [['FALLBACK', 'Events whose listener failed for good and whose fallback handled them'],
      ['DISCARDED', 'Events an operator discarded: never delivered, kept until the purge']]) {
      if ((o.counts[name] || 0) === 0) continue; // none found (among the first count_limit, at least)
      const f = el('li', null, 'chip status-' + name.toLowerCase());
      f.dataset.status = name;
      f.title = title;
      f.append(el('span', name, 'label'), el('span', countOf(o, name), 'value'));
      ul.append(f);
    }
    const li = el('li', null, 'chip');
    li.append(el('span', 'oldest pending', 'label'),
      el('span', o.oldest_pending_age_seconds == null ? '—' : duration(o.oldest_pending_age_seconds), 'value'));
    ul.append(li);
    // Ordered delivery, when the table has any: the events waiting for earlier ones of
    // their key, and the keys held by a RETRY or DEAD event.
    if ((o.counts.WAITING || 0) > 0 || o.blocked_keys > 0) {
      const w = el('li', null, 'chip status-waiting');
      w.dataset.status = 'WAITING';
      w.title = 'Ordered events waiting for an earlier event of their order key';
      w.append(el('span', 'WAITING', 'label'), el('span', countOf(o, 'WAITING'), 'value'));
      const b = el('li', null, 'chip');
      b.dataset.status = 'blocked-keys';
      b.title = 'Order keys whose waiting events are held by a RETRY or DEAD event' +
        (o.oldest_blocked_at ? ' (oldest since ' + o.oldest_blocked_at + ')' : '');
      b.append(el('span', 'blocked keys', 'label'), el('span', bounded(o.blocked_keys, o.blocked_keys_at_least), 'value'));
      if (o.blocked_keys > 0) {
        // A blocked key's holder is a RETRY or a DEAD event: the chip opens the list of
        // the holders, DEAD first (they wait for an operator; RETRY ones retry).
        const open = button(null, 'chip', 'blocked-keys');
        open.title = b.title + '. Show the events that hold them.';
        open.append(...b.childNodes);
        open.addEventListener('click', () => openHolders().catch(report));
        b.className = 'chip-slot';
        b.removeAttribute('title');
        b.append(open);
      }
      ul.append(w, b);
    }
    for (const [view, l] of Object.entries(LISTS)) {
      const n = $('tab-' + view).querySelector('.n');
      n.textContent = countOf(o, l.status);
      n.title = o.at_least && o.at_least[l.status]
        ? 'Counted among the first ' + num(o.count_limit) + ' events of the list: there are that many or more' : '';
    }
    renderTypeTable(o);
    if (state.view in LISTS && state.view !== 'dead') renderListSummary();
    await loadSubscriptions();
  }

  // loadSubscriptions shows each subscription's load in the process serving the page
  // (GET /api/subscriptions) under the per-type table: queued, running, its limits,
  // whether it is paused (since when, by whom, why), and a Pause or Resume button.
  async function loadSubscriptions() {
    const seq = ++state.subsSeq;
    let s;
    try {
      s = await api('api/subscriptions');
    } catch (e) {
      if (e instanceof APIError && e.status === 404) return; // an older server
      throw e;
    }
    if (seq !== state.subsSeq) return; // a later request owns the table
    const tbody = $('sub-rows');
    tbody.replaceChildren();
    for (const l of s.subscriptions) {
      const tr = el('tr');
      tr.dataset.listener = l.listener;
      const paused = !!l.pause || !!l.paused;
      tr.dataset.state = paused ? 'paused' : 'active';
      const registered = l.registered !== false;
      const actions = el('td', null, 'actions');
      if (s.pause_supported) {
        actions.append(paused ? button('Resume…', null, 'resume') : button('Pause…', 'danger', 'pause'));
      }
      tr.append(cellText(l.listener, 'mono'),
        el('td', registered ? num(l.queued) : '—', 'num'), el('td', registered ? num(l.running) : '—', 'num'),
        el('td', l.max_concurrency > 0 ? num(l.max_concurrency) : '—', 'num'),
        el('td', l.rate_limit > 0 ? String(l.rate_limit) + '/s' : '—', 'num'),
        subscriptionState(l, registered), actions);
      tbody.append(tr);
    }
    $('subs').hidden = s.subscriptions.length === 0;
  }

  // subscriptionState is the State cell of a subscription: paused since when, by whom
  // and why (the table's pause), how this process applies it, or its limits holding it.
  function subscriptionState(l, registered) {
    const td = el('td', null, 'state');
    const parts = [];
    if (l.pause) {
      const since = el('span', 'Paused since ' + when(l.pause.since), 'paused');
      since.title = l.pause.since;
      parts.push(since, el('span', ' by ' + l.pause.actor, 'by'));
      if (l.pause.reason) parts.push(el('span', ': ' + l.pause.reason, 'reason'));
      if (!registered) parts.push(el('span', ' (not run by this process)', 'note'));
    } else if (l.paused) {
      // Resumed elsewhere a moment ago: this process reads it at its next poll.
      parts.push(el('span', 'Resuming', 'paused'));
    }
    if (l.limited) parts.push(el('span', (parts.length ? '; ' : '') + 'waiting for its limits', 'limited'));
    td.append(...parts);
    return td;
  }

  // openHolders opens the list of the events that hold their order key: the Dead tab
  // when a DEAD event holds one (or its search window could not tell), else Retrying.
  async function openHolders() {
    const dead = await api('api/events' + query({ status: 'dead', blocking: '1', limit: '1' }));
    openList(dead.events.length > 0 || dead.partial ? 'dead' : 'retry', { ...emptyFilter(), blocking: '1' });
  }

  // renderTypeTable shows the counts per event type (rows) and status (columns); a
  // count opens that list filtered by the type.
  function renderTypeTable(o) {
    const byType = new Map();
    for (const c of o.by_type || []) {
      if (!byType.has(c.event_type)) byType.set(c.event_type, {});
      byType.get(c.event_type)[c.status] = c;
    }
    const head = $('type-head');
    head.replaceChildren(el('th', 'Event type'));
    for (const s of STATUS_ORDER) head.append(el('th', s, 'num'));
    head.append(el('th', 'All', 'num'));
    const tbody = $('type-rows');
    tbody.replaceChildren();
    for (const [type, counts] of byType) {
      const tr = el('tr');
      tr.dataset.eventType = type;
      tr.append(cellText(type, 'mono'));
      let all = 0;
      let allAtLeast = false;
      for (const s of STATUS_ORDER) {
        const c = counts[s] || { count: 0, at_least: false };
        const n = c.count;
        all += n;
        allAtLeast = allAtLeast || c.at_least;
        const td = el('td', null, 'num');
        td.dataset.status = s;
        if (n > 0) {
          const b = button(bounded(n, c.at_least), 'link');
          b.title = 'List the ' + s + ' events of type ' + type +
            (c.at_least ? ' (counted among the first ' + num(o.count_limit) + ' ' + s + ' events)' : '');
          b.addEventListener('click', () => openList(VIEW_OF_STATUS[s], { ...emptyFilter(), event_type: type }));
          td.append(b);
        } else {
          td.append(el('span', '·', 'zero'));
        }
        tr.append(td);
      }
      tr.append(el('td', bounded(all, allAtLeast), 'num total'));
      tbody.append(tr);
    }
    $('types-empty').hidden = byType.size > 0;
    $('type-table').hidden = byType.size === 0;
    const parts = [];
    parts.push('Oldest pending event: ' + (o.oldest_pending_at ? when(o.oldest_pending_at) : 'none') + '.');
    const keys = bounded(o.blocked_keys, o.blocked_keys_at_least);
    parts.push(o.blocked_keys === 0 && !o.blocked_keys_at_least ? 'No order key is blocked.'
      : (o.blocked_keys === 1 && !o.blocked_keys_at_least ? '1 order key is' : keys + ' order keys are') + ' blocked by a RETRY or DEAD event' +
        (o.oldest_blocked_at ? ', the oldest since ' + when(o.oldest_blocked_at) : '') + '.');
    if (o.by_type == null) parts.push('This store cannot count events per type.');
    if (Object.values(o.at_least || {}).some(Boolean)) {
      parts.push('A count marked + stopped after the first ' + num(o.count_limit) + ' events of its list: there are that many or more.');
    }
    $('types-summary').replaceChildren(parts.join(' '));
    if (o.blocked_keys > 0) {
      const show = button('Show the events that hold them', 'link', 'holders');
      show.addEventListener('click', () => openHolders().catch(report));
      $('types-summary').append(' ', show);
    }
  }

  // ---- the lists ----

  // renderListSummary says how many events the list's status has in all, with the
  // per-type chips of that status (a click filters by the type). The dead list has
  // its own, with exact counts per filter (loadDeadCount).
  function renderListSummary() {
    const l = LISTS[state.view];
    const o = state.overview;
    if (!o) return;
    const total = o.counts[l.status] || 0;
    const atLeast = o.at_least && o.at_least[l.status];
    const f = filterText(state.filter);
    $('match-count').textContent = (atLeast ? atLeastText(total, l.noun + ' event', o.count_limit)
      : plural(total, l.noun + ' event') + ' in all') + (f ? '; listing those' + f : '');
    $('replay-all').hidden = true;
    const ul = $('types');
    ul.replaceChildren();
    for (const c of (o.by_type || []).filter((c) => c.status === l.status).sort((a, b) => b.count - a.count)) {
      const b = button(null, 'chip');
      b.title = 'Show only these';
      b.append(el('span', c.event_type, 'label'), el('span', bounded(c.count, c.at_least), 'value'));
      b.addEventListener('click', () => setFilter({ ...state.filter, event_type: c.event_type }));
      const li = el('li');
      li.append(b);
      ul.append(li);
    }
    $('listeners').hidden = true;
  }

  // loadDeadCount shows the number of DEAD events matching the filter and their counts
  // per type and listener, and enables "Replay all matching" (which takes the same
  // filter). Filters it does not take (aggregate ID, error, time) leave the count out.
  async function loadDeadCount() {
    const f = state.filter;
    const df = { event_type: f.event_type, aggregate_type: f.aggregate_type, listener: f.listener };
    const seq = ++state.countSeq;
    const c = await api('api/dead-events/count' + query({ ...df, by: 'type,listener' }));
    if (seq !== state.countSeq || state.view !== 'dead') return;
    const n = c.count;
    // A count that stopped after count_limit events is "10,000+": there may be more.
    const shown = c.at_least ? bounded(n, true) : String(n);
    $('replay-all').hidden = false;
    if (deadFilterOnly(f)) {
      $('match-count').textContent = c.at_least ? atLeastText(n, 'dead event', c.count_limit, filterText(f))
        : n === 1 ? '1 dead event' + filterText(f) : n + ' dead events' + filterText(f);
      $('replay-all').disabled = n === 0 && !c.at_least;
      $('replay-all').title = '';
    } else {
      $('match-count').textContent = 'Dead events' + filterText(f) + ' (' + shown + ' match the type and listener filters)';
      $('replay-all').disabled = true;
      $('replay-all').title = 'Replay all matching takes the event type, aggregate type and listener filters only: ' +
        'select the events and replay them instead.';
    }
    $('replay-all').dataset.count = String(n);
    const ul = $('types');
    ul.replaceChildren();
    for (const t of c.by_type || []) {
      const b = button(null, 'chip');
      b.title = 'Show only these';
      b.append(el('span', t.aggregate_type + ' / ' + t.event_type, 'label'), el('span', t.count, 'value'));
      b.addEventListener('click', () => setFilter({ ...state.filter, event_type: t.event_type, aggregate_type: t.aggregate_type }));
      const li = el('li');
      li.append(b);
      ul.append(li);
    }
    if (c.partial) ul.append(el('li', 'counted the oldest ' + num(c.count_limit) + ' only', 'note'));
    // The listeners whose deliveries died: a fan-out delivery, or an event whose listener
    // failed for good, names its listener; older events may name none.
    const ls = $('listeners');
    ls.replaceChildren();
    const byListener = c.by_listener || [];
    if (byListener.some((l) => l.listener)) {
      for (const l of byListener) {
        let b;
        if (l.listener) {
          b = button(null, 'chip');
          b.title = 'Show only the dead events of this listener';
          b.addEventListener('click', () => setFilter({ ...state.filter, listener: l.listener }));
        } else {
          b = el('span', null, 'chip');
          b.title = 'Dead events that name no listener';
        }
        b.dataset.listener = l.listener;
        b.append(el('span', l.listener ? 'listener ' + l.listener : 'no listener', 'label'), el('span', l.count, 'value'));
        const li = el('li');
        li.append(b);
        ls.append(li);
      }
    }
    ls.hidden = ls.children.length === 0;
  }

  // cellText is a cell whose text stays on one line (cut with an ellipsis past its
  // column's limit, in full in its tooltip and the details), never wrapped mid-word.
  function cellText(text, cls) {
    const td = el('td', null, cls);
    const span = el('span', text, 'one-line');
    span.title = text;
    td.append(span);
    return td;
  }

  // listTime is the time the list is ordered by: when the event finished for a list of
  // finished events, else when it was created (and for any list of one aggregate).
  function listTime(e) {
    return LISTS[state.view].finished && !state.filter.aggregate_id && e.done_at ? e.done_at : e.created_at;
  }

  function row(e) {
    const l = LISTS[state.view];
    const tr = el('tr');
    tr.dataset.id = e.id;
    const pick = el('td', null, 'c-pick');
    if (l.actions.length) {
      const box = el('input');
      box.type = 'checkbox';
      box.className = 'pick';
      box.setAttribute('aria-label', 'Select event ' + e.id);
      box.checked = state.picked.has(e.id);
      pick.append(box);
    }
    const t = listTime(e);
    // A list of one order key is in the key's order: each row shows its place too.
    const time = el('td', (state.filter.order_key && e.order_seq ? '#' + e.order_seq + ' · ' : '') + ago(t));
    time.title = t;
    const agg = cellText(e.aggregate_type + (e.aggregate_id ? ' ' + e.aggregate_id : ''));
    const listener = cellText(e.listener || '—', 'mono c-listener');
    const err = el('td', e.last_error, 'last-error');
    err.title = e.last_error;
    const actions = el('td', null, 'actions');
    actions.append(button('Details', '', 'details'));
    if (e.status === 'DEAD') actions.append(button('Replay…', 'danger', 'replay'));
    if (['DEAD', 'NEW', 'RETRY', 'WAITING'].includes(e.status)) actions.append(button('Discard…', 'danger', 'discard'));
    if (e.status === 'DEAD') actions.append(button('Delete…', 'danger', 'delete'));
    tr.append(pick, time, cellText(e.event_type, 'mono'), agg, listener, el('td', e.attempts, 'num'), err, actions);
    if (e.id === state.selected) tr.classList.add('selected');
    if (state.picked.has(e.id)) tr.classList.add('picked');
    return tr;
  }

  // loadEvents shows the current page of the current list.
  async function loadEvents() {
    const seq = ++state.seq;
    const view = state.view;
    const f = state.filter;
    const params = {
      status: view, event_type: f.event_type, aggregate_type: f.aggregate_type, aggregate_id: f.aggregate_id,
      listener: f.listener, order_key: f.order_key, error: f.error, from: isoOf(f.from), to: isoOf(f.to),
      blocking: f.blocking && BLOCKING_VIEWS.includes(view) ? '1' : '',
      newest: state.newest ? '1' : '', after: state.pages[state.page],
    };
    const page = await api('api/events' + query(params));
    if (seq !== state.seq) return; // a later request owns the list
    state.picked.clear();
    const tbody = $('rows');
    tbody.replaceChildren(...page.events.map(row));
    state.next = page.next || '';
    const l = LISTS[view];
    $('empty').hidden = page.events.length > 0 || page.partial;
    $('empty').textContent = 'No ' + l.noun + ' events match' + (state.page > 0 ? ' on this page.' : '.') +
      (view === 'dead' && state.page === 0 && !filterText(f) ? ' Nothing to replay.' : '');
    $('partial').hidden = !page.partial;
    $('partial-text').textContent = page.partial
      ? 'This page searched ' + num(page.scan_limit) + ' rows and found ' +
        plural(page.events.length, 'matching event') + ' (fewer than a page). Searching stops there so that it ' +
        'never holds up the table; continue to search the next ' + num(page.scan_limit) + ' rows.'
      : '';
    $('next-page').disabled = !state.next;
    $('prev-page').disabled = state.page === 0;
    $('first-page').disabled = state.page === 0;
    $('page-info').textContent = 'Page ' + (state.page + 1) + (page.partial ? ' (partial)' : '') +
      (state.newest ? ', newest first' : ', oldest first');
    renderPicked();
  }

  function renderPicked() {
    const l = LISTS[state.view];
    const n = state.picked.size;
    const boxes = [...$('rows').querySelectorAll('input.pick')];
    $('select-page').disabled = boxes.length === 0;
    $('select-page').checked = boxes.length > 0 && boxes.every((b) => b.checked);
    $('select-page').indeterminate = n > 0 && !$('select-page').checked;
    $('picked-count').textContent = l.actions.length === 0 ? LISTS[state.view].status + ' events are final: nothing to change'
      : n === 0 ? 'Select events to change several at once' : plural(n, 'event') + ' selected';
    for (const a of ['replay', 'discard', 'delete']) {
      const b = $('bulk-' + a);
      b.hidden = !l.actions.includes(a);
      b.disabled = n === 0;
      b.textContent = { replay: 'Replay', discard: 'Discard', delete: 'Delete' }[a] + (n ? ' ' + n : '') + ' selected…';
    }
  }

  // refresh reloads the overview and the current view. Until the first load returns,
  // the page shows a loading state; a failure shows an error that says what to do,
  // with a Retry button. Refreshes may overlap (a tab clicked while the page loads):
  // each part drops an answer older than one it already drew, and only the latest
  // refresh says how it ended and clears the busy state.
  async function refresh() {
    const seq = ++state.refreshSeq;
    if ($('app').hidden && $('login').hidden) showStatus('Loading events…', false);
    $('refresh').disabled = true;
    $('app').setAttribute('aria-busy', 'true');
    try {
      await Promise.all([loadOverview(), loadView()]);
      if (seq !== state.refreshSeq) return;
      hideStatus();
      showApp();
    } catch (err) {
      if (seq !== state.refreshSeq) return;
      if (!(err instanceof APIError && err.status === 401)) showStatus(explain(err), true);
    } finally {
      if (seq === state.refreshSeq) {
        $('refresh').disabled = false;
        $('app').removeAttribute('aria-busy');
      }
    }
  }

  async function loadView() {
    if (state.view === 'audit') return loadAudit(true);
    if (state.view === 'types') return undefined; // drawn by loadOverview
    const loads = [loadEvents()];
    if (state.view === 'dead') loads.push(loadDeadCount());
    await Promise.all(loads);
    if (state.view !== 'dead') renderListSummary();
    return undefined;
  }

  // showView switches the tabs and panels to view, without loading anything.
  function showView(view) {
    state.view = view;
    for (const b of $('tabs').querySelectorAll('[data-view]')) {
      const on = b.dataset.view === view;
      b.classList.toggle('active', on);
      b.setAttribute('aria-selected', on ? 'true' : 'false');
    }
    $('view-events').hidden = !(view in LISTS);
    $('view-types').hidden = view !== 'types';
    $('view-audit').hidden = view !== 'audit';
    if (view in LISTS) {
      const finished = LISTS[view].finished;
      $('time-head').textContent = finished ? 'Finished' : 'Created';
      $('f-blocking-label').hidden = !BLOCKING_VIEWS.includes(view);
      $('f-time-label').textContent = finished ? 'Finished' : 'Created';
      $('bulk').hidden = false;
    }
  }

  // openList shows the list of view from its first page, with filter when given;
  // finished events come newest first by default.
  function openList(view, filter) {
    if (filter) writeFilter(filter);
    if (LISTS[view].finished && state.filter.order_key) {
      // Finished events have left their key: no list of them goes by order key.
      writeFilter({ ...state.filter, order_key: '' });
      toast('The order key filter was cleared: ' + LISTS[view].noun + ' events have left their key.');
    }
    state.newest = LISTS[view].finished;
    $('f-newest').checked = state.newest;
    state.pages = [''];
    state.page = 0;
    closeDetail();
    showView(view);
    refresh();
  }

  function writeFilter(f) {
    state.filter = { ...emptyFilter(), ...f };
    for (const k of FILTER_KEYS) {
      if (k === 'blocking') $(FILTER_INPUTS[k]).checked = !!state.filter[k];
      else $(FILTER_INPUTS[k]).value = state.filter[k];
    }
  }

  function setFilter(f) {
    writeFilter(f);
    state.pages = [''];
    state.page = 0;
    refresh();
  }

  function readFilter() {
    const f = {};
    for (const k of FILTER_KEYS) f[k] = k === 'blocking' ? ($(FILTER_INPUTS[k]).checked ? '1' : '') : $(FILTER_INPUTS[k]).value.trim();
    return f;
  }

  function goPage(page) {
    state.page = page;
    state.pages.length = page + 1;
    loadEvents().catch(report);
  }

  // ---- details ----

  async function showDetail(id) {
    const e = await api('api/events/' + encodeURIComponent(id));
    state.selected = id;
    for (const tr of $('rows').children) tr.classList.toggle('selected', tr.dataset.id === id);
    const dl = $('detail-fields');
    dl.replaceChildren();
    const finishedLabel = { DEAD: 'Dead since', DONE: 'Delivered', FALLBACK: 'Handled by fallback', DISCARDED: 'Discarded' };
    const fields = [
      ['ID', e.id], ['Status', e.status], ['Event type', e.event_type],
      ['Aggregate', e.aggregate_type + (e.aggregate_id ? ' ' + e.aggregate_id : '')],
      ['Listener', e.listener || '—'],
      ['Tenant', e.tenant_id || '—'], ['Attempts', e.attempts], ['Created', when(e.created_at)],
      ['Due', ['NEW', 'RETRY'].includes(e.status) ? when(e.available_at) : '—'],
      ['First failure', when(e.first_attempt_at)],
      [finishedLabel[e.status] || 'Finished', when(e.done_at)],
      ['Claimed by', e.locked_by ? e.locked_by + (e.locked_until ? ' until ' + when(e.locked_until) : '') : '—'],
    ];
    if (e.order_key) {
      // An ordered event: under DeadKeyWaits its key's later events wait for it.
      fields.push(['Order key', e.order_key + ' (#' + e.order_seq + ')']);
      if (e.status === 'DEAD') fields.push(['Its key', 'later events of this key wait until it is replayed or deleted (DeadKeyWaits)']);
      if (e.status === 'WAITING') fields.push(['Its key', 'it waits for the earlier events of its key']);
    }
    for (const [k, v] of fields) dl.append(el('dt', k), el('dd', v));
    $('detail-error').textContent = e.last_error || '—';
    $('detail-error').classList.toggle('error-text', !!e.last_error);
    $('detail-headers').textContent = Object.keys(e.headers || {}).length ? JSON.stringify(e.headers, null, 2) : '—';
    $('detail-payload').textContent = JSON.stringify(e.payload, null, 2);
    const pending = ['DEAD', 'NEW', 'RETRY', 'WAITING'].includes(e.status);
    const keyed = pending && !!e.order_key;
    $('detail-key').dataset.key = keyed ? e.order_key : '';
    $('detail-key').hidden = !keyed;
    for (const [b, on] of [['detail-replay', e.status === 'DEAD'], ['detail-discard', pending], ['detail-delete', e.status === 'DEAD']]) {
      $(b).dataset.id = e.id;
      $(b).disabled = !on;
      $(b).hidden = !on;
    }
    $('detail').hidden = false;
    $('detail').parentElement.classList.add('with-detail');
  }

  function closeDetail() {
    state.selected = '';
    $('detail').hidden = true;
    $('detail').parentElement.classList.remove('with-detail');
    for (const tr of $('rows').children) tr.classList.remove('selected');
  }

  // ask shows the modal dialog and resolves to true when the user confirms. With
  // withReason, the dialog also has the empty reason field, read by the caller.
  function ask(title, text, okLabel, withReason) {
    const d = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okLabel;
    $('confirm-reason').value = '';
    $('confirm-reason-label').hidden = !withReason;
    return new Promise((resolve) => {
      const done = (ok) => {
        $('confirm-ok').removeEventListener('click', onOK);
        $('confirm-cancel').removeEventListener('click', onCancel);
        d.removeEventListener('close', onClose);
        if (d.open) d.close();
        resolve(ok);
      };
      const onOK = () => done(true);
      const onCancel = () => done(false);
      // A dialog fires "close" in a task queued by close(): the close of the dialog
      // before this one can arrive after this one opened. Only a close that left the
      // dialog closed (Escape) answers this one.
      const onClose = () => {
        if (!d.open) done(false);
      };
      $('confirm-ok').addEventListener('click', onOK);
      $('confirm-cancel').addEventListener('click', onCancel);
      d.addEventListener('close', onClose);
      d.showModal();
      $('confirm-cancel').focus();
    });
  }

  function removeRow(id) {
    for (const tr of [...$('rows').children]) if (tr.dataset.id === id) tr.remove();
    state.picked.delete(id);
    $('empty').hidden = $('rows').children.length > 0;
    if (state.selected === id) closeDetail();
    renderPicked();
  }

  // ---- changes ----

  async function replayOne(id) {
    const ok = await ask('Replay this event?', 'Event ' + id + ' goes back to NEW with its attempts reset, ' +
      'and the poller delivers it again. Replay it only after the cause of its failure is fixed.', 'Replay');
    if (ok) await actOn(id, '/replay', 'Replayed ' + id + ': it is NEW again and will be delivered shortly.');
  }

  async function discardOne(id) {
    const ok = await ask('Discard this event?', 'Event ' + id + ' becomes DISCARDED: it is never delivered, and its ' +
      'row is kept until the purge. If it is ordered, the later events of its order key move on without it.', 'Discard');
    if (ok) await actOn(id, '/discard', 'Discarded ' + id + '.');
  }

  async function deleteOne(id) {
    const ok = await ask('Delete this event?', 'Event ' + id + ' is deleted from the table and never delivered. ' +
      'If it is ordered, the later events of its order key move on without it. This cannot be undone.', 'Delete');
    if (ok) await actOn(id, '/delete', 'Deleted ' + id + '.');
  }

  // actOn posts a confirmed action on one event, takes its row off the list (also when
  // it is not in a state for it any more, or gone) and refreshes the counts.
  async function actOn(id, path, done) {
    try {
      await api(eventPath(id) + path, 'POST', {});
      removeRow(id);
      toast(done);
    } catch (err) {
      if (err instanceof APIError && (err.status === 409 || err.status === 404)) {
        removeRow(id);
        toast(err.status === 409 ? 'Event ' + id + ' is not ' + (err.code === 'finished' ? 'pending or DEAD' : 'DEAD') +
          ' any more.' : 'Event ' + id + ' no longer exists.', 'bad');
      } else {
        report(err);
        return;
      }
    }
    try {
      await Promise.all([loadOverview(), state.view === 'dead' ? loadDeadCount() : null]);
    } catch (err) {
      report(err);
    }
  }

  // BULK describes the bulk actions: the confirmation and the result.
  const BULK = {
    replay: {
      verb: 'Replay', past: 'Replayed',
      text: (n) => 'The ' + plural(n, 'selected DEAD event') + ' go back to NEW with their attempts reset, and the ' +
        'poller delivers them again. Replay them only after the cause of their failure is fixed.',
    },
    discard: {
      verb: 'Discard', past: 'Discarded',
      text: (n) => 'The ' + plural(n, 'selected event') + ' become DISCARDED: never delivered, kept until the purge. ' +
        'The later events of their order keys move on without them.',
    },
    delete: {
      verb: 'Delete', past: 'Deleted',
      text: (n) => 'The ' + plural(n, 'selected DEAD event') + ' are deleted from the table and never delivered. ' +
        'The later events of their order keys move on without them. This cannot be undone.',
    },
  };

  // bulk asks for confirmation, then changes the selected events of the page at once,
  // says how many changed, and reloads the page and the counts.
  async function bulk(action) {
    const ids = [...state.picked];
    if (ids.length === 0) return;
    const b = BULK[action];
    const ok = await ask(b.verb + ' ' + plural(ids.length, 'event') + '?', b.text(ids.length), b.verb + ' ' + ids.length);
    if (!ok) return;
    try {
      const r = await api('api/events/' + action, 'POST', { ids });
      const skipped = r.requested - r.count;
      toast(b.past + ' ' + r.count + ' of ' + plural(r.requested, 'selected event') + '.' +
        (skipped ? ' ' + skipped + (skipped === 1 ? ' was' : ' were') + ' not in a state for it any more.' : ''), skipped ? 'bad' : 'ok');
      if (ids.includes(state.selected)) closeDetail();
    } catch (err) {
      report(err);
    }
    refresh();
  }

  async function replayAll() {
    let n;
    const f = state.filter;
    const df = { event_type: f.event_type, aggregate_type: f.aggregate_type, listener: f.listener };
    try {
      const c = await api('api/dead-events/count' + query(df));
      n = c.at_least ? 'all ' + bounded(c.count, true) : c.count;
    } catch (err) {
      report(err);
      return;
    }
    if (n === 0) {
      toast('No dead events match.');
      return;
    }
    const ok = await ask('Replay ' + n + ' dead event' + (n === 1 ? '' : 's') + '?',
      'Every DEAD event' + filterText(df) + ' goes back to NEW with its attempts reset, ' +
      'and the poller delivers them again. Replay them only after the cause of their failure is fixed.',
      'Replay ' + n);
    if (!ok) return;
    try {
      const r = await api('api/dead-events/replay', 'POST', df);
      toast('Replayed ' + r.replayed + ' event' + (r.replayed === 1 ? '' : 's') + '.');
      closeDetail();
    } catch (err) {
      report(err);
    }
    setFilter(state.filter);
  }

  // ---- subscriptions: pause and resume ----

  // pauseSubscription asks for confirmation and a reason, pauses the subscription on
  // every process of the table, and shows its new state.
  async function pauseSubscription(name) {
    const ok = await ask('Pause ' + name + '?', 'The events of subscription ' + name + ' stay pending in the table, on ' +
      'every process of the table, until it is resumed; an attempt running now finishes. The other subscriptions of ' +
      'the same events go on.', 'Pause', true);
    if (!ok) return;
    const reason = $('confirm-reason').value.trim();
    await changeSubscription('pause', { listener: name, reason }, 'Paused ' + name + ': its events stay pending until it is resumed.');
  }

  async function resumeSubscription(name) {
    const ok = await ask('Resume ' + name + '?', 'The pending events of subscription ' + name + ' are delivered again, ' +
      'oldest first, on every process that runs it.', 'Resume');
    if (ok) await changeSubscription('resume', { listener: name }, 'Resumed ' + name + '.');
  }

  // changeSubscription posts a confirmed pause or resume and reloads the subscriptions.
  async function changeSubscription(action, body, done) {
    try {
      await api('api/subscriptions/' + action, 'POST', body);
      toast(done);
    } catch (err) {
      report(err);
    }
    try {
      await loadSubscriptions();
    } catch (err) {
      report(err);
    }
  }

  // ---- audit ----

  async function loadAudit(reset) {
    const page = await api('api/audit' + query({ before: reset ? '' : state.auditNext }));
    const tbody = $('audit-rows');
    if (reset) tbody.replaceChildren();
    for (const a of page.entries) {
      const tr = el('tr');
      tr.dataset.id = a.id;
      const at = el('td', when(a.at));
      at.title = a.at;
      tr.append(at, cellText(a.actor, 'actor'), el('td', a.action, 'action action-' + a.action),
        el('td', a.count, 'num'), cellText(a.target, 'mono target'));
      tbody.append(tr);
    }
    state.auditNext = page.next || '';
    $('audit-more').hidden = !state.auditNext;
    $('audit-empty').hidden = tbody.children.length > 0;
  }

  // ---- wiring ----

  $('tabs').addEventListener('click', (ev) => {
    const b = ev.target.closest('[data-view]');
    if (!b) return;
    const view = b.dataset.view;
    if (view in LISTS) {
      openList(view);
      return;
    }
    showView(view);
    refresh();
  });
  $('rows').addEventListener('click', (ev) => {
    const box = ev.target.closest('input.pick');
    if (box) {
      const tr = box.closest('tr');
      if (box.checked) state.picked.add(tr.dataset.id);
      else state.picked.delete(tr.dataset.id);
      tr.classList.toggle('picked', box.checked);
      renderPicked();
      return;
    }
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const id = b.closest('tr').dataset.id;
    if (b.dataset.action === 'details') showDetail(id).catch(report);
    else if (b.dataset.action === 'replay') replayOne(id);
    else if (b.dataset.action === 'discard') discardOne(id);
    else if (b.dataset.action === 'delete') deleteOne(id);
  });
  $('sub-rows').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const name = b.closest('tr').dataset.listener;
    if (b.dataset.action === 'pause') pauseSubscription(name);
    else if (b.dataset.action === 'resume') resumeSubscription(name);
  });
  $('select-page').addEventListener('change', () => {
    const on = $('select-page').checked;
    for (const box of $('rows').querySelectorAll('input.pick')) {
      box.checked = on;
      const tr = box.closest('tr');
      tr.classList.toggle('picked', on);
      if (on) state.picked.add(tr.dataset.id);
      else state.picked.delete(tr.dataset.id);
    }
    renderPicked();
  });
  for (const a of ['replay', 'discard', 'delete']) $('bulk-' + a).addEventListener('click', () => bulk(a));
  $('detail-close').addEventListener('click', closeDetail);
  $('detail-replay').addEventListener('click', () => replayOne($('detail-replay').dataset.id));
  $('detail-discard').addEventListener('click', () => discardOne($('detail-discard').dataset.id));
  $('detail-delete').addEventListener('click', () => deleteOne($('detail-delete').dataset.id));
  // The events that wait behind this one (or with it) in its order key.
  $('detail-key').addEventListener('click', () => openList('waiting', { order_key: $('detail-key').dataset.key }));
  $('next-page').addEventListener('click', () => {
    if (!state.next) return;
    state.pages.push(state.next);
    goPage(state.page + 1);
  });
  $('partial-continue').addEventListener('click', () => $('next-page').click());
  $('prev-page').addEventListener('click', () => goPage(Math.max(0, state.page - 1)));
  $('first-page').addEventListener('click', () => goPage(0));
  $('audit-more').addEventListener('click', () => loadAudit(false).catch(report));
  $('replay-all').addEventListener('click', replayAll);
  $('refresh').addEventListener('click', refresh);
  $('status-retry').addEventListener('click', refresh);
  $('clear-filters').addEventListener('click', () => {
    state.newest = state.view in LISTS && LISTS[state.view].finished;
    $('f-newest').checked = state.newest;
    setFilter({});
  });
  $('filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.newest = $('f-newest').checked;
    setFilter(readFilter());
  });
  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    token = $('token').value.trim();
    $('token').value = '';
    sessionStorage.setItem(tokenKey, token);
    refresh();
  });
  $('sign-out').addEventListener('click', () => {
    token = '';
    sessionStorage.removeItem(tokenKey);
    showLogin('');
  });

  showView(state.view);
  refresh();
})();
