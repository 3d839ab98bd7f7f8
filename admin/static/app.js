// Outbox dead-event admin. Plain browser JavaScript, no dependencies, no build step.
//
// Every stored string (IDs, types, errors, headers, payloads) is inserted with
// textContent or as an attribute value, never as HTML. The API is called with URLs
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

  const state = { filter: { event_type: '', aggregate_type: '', listener: '' }, next: '', selected: '', loading: 0 };

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

  function ago(iso) {
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    return duration(s) + ' ago';
  }

  function duration(s) {
    if (s < 60) return Math.round(s) + 's';
    if (s < 3600) return Math.round(s / 60) + 'm';
    if (s < 86400) return Math.round(s / 3600) + 'h';
    return Math.round(s / 86400) + 'd';
  }

  function filterText(f) {
    const parts = [];
    if (f.event_type) parts.push('event type "' + f.event_type + '"');
    if (f.aggregate_type) parts.push('aggregate type "' + f.aggregate_type + '"');
    if (f.listener) parts.push('listener "' + f.listener + '"');
    return parts.length ? ' with ' + parts.join(' and ') : '';
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

  async function loadOverview() {
    const o = await api('api/overview');
    const ul = $('overview');
    ul.replaceChildren();
    for (const name of ['DEAD', 'RETRY', 'NEW', 'DONE']) {
      const li = el('li', null, 'chip status-' + name.toLowerCase());
      li.append(el('span', name, 'label'), el('span', o.counts[name] || 0, 'value'));
      li.dataset.status = name;
      ul.append(li);
    }
    // Final states besides DONE and DEAD, when the table has any.
    for (const [name, title] of [['FALLBACK', 'Events whose listener failed for good and whose fallback handled them'],
      ['DISCARDED', 'Events an operator discarded: never delivered, kept until the purge']]) {
      if ((o.counts[name] || 0) === 0) continue;
      const f = el('li', null, 'chip status-' + name.toLowerCase());
      f.dataset.status = name;
      f.title = title;
      f.append(el('span', name, 'label'), el('span', o.counts[name], 'value'));
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
      w.append(el('span', 'WAITING', 'label'), el('span', o.counts.WAITING || 0, 'value'));
      const b = el('li', null, 'chip');
      b.dataset.status = 'blocked-keys';
      b.title = 'Order keys whose waiting events are held by a RETRY or DEAD event' +
        (o.oldest_blocked_at ? ' (oldest since ' + o.oldest_blocked_at + ')' : '');
      b.append(el('span', 'blocked keys', 'label'), el('span', o.blocked_keys, 'value'));
      ul.append(w, b);
    }
  }

  async function loadCount() {
    const c = await api('api/dead-events/count' + query({ ...state.filter, by: 'type,listener' }));
    const n = c.count;
    $('match-count').textContent = n === 1 ? '1 dead event' + filterText(state.filter)
      : n + ' dead events' + filterText(state.filter);
    $('replay-all').disabled = n === 0;
    $('replay-all').dataset.count = String(n);
    const ul = $('types');
    ul.replaceChildren();
    for (const t of c.by_type || []) {
      const b = el('button', null, 'chip');
      b.type = 'button';
      b.title = 'Show only these';
      b.append(el('span', t.aggregate_type + ' / ' + t.event_type, 'label'), el('span', t.count, 'value'));
      b.addEventListener('click', () => setFilter({ ...state.filter, event_type: t.event_type, aggregate_type: t.aggregate_type }));
      const li = el('li');
      li.append(b);
      ul.append(li);
    }
    if (c.partial) ul.append(el('li', 'counted the oldest 10,000 only', 'note'));
    // The listeners whose deliveries died: a fan-out delivery, or an event whose listener
    // failed for good, names its listener; older events may name none.
    const ls = $('listeners');
    ls.replaceChildren();
    const byListener = c.by_listener || [];
    if (byListener.some((l) => l.listener)) {
      for (const l of byListener) {
        let b;
        if (l.listener) {
          b = el('button', null, 'chip');
          b.type = 'button';
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

  function row(e) {
    const tr = el('tr');
    tr.dataset.id = e.id;
    const created = el('td', ago(e.created_at));
    created.title = e.created_at;
    const agg = cellText(e.aggregate_type + (e.aggregate_id ? ' ' + e.aggregate_id : ''));
    const listener = cellText(e.listener || '—', 'mono c-listener');
    const err = el('td', e.last_error, 'last-error');
    err.title = e.last_error;
    const actions = el('td', null, 'actions');
    const details = el('button', 'Details');
    details.type = 'button';
    details.dataset.action = 'details';
    const replay = el('button', 'Replay…', 'danger');
    replay.type = 'button';
    replay.dataset.action = 'replay';
    const discard = el('button', 'Discard…', 'danger');
    discard.type = 'button';
    discard.dataset.action = 'discard';
    const del = el('button', 'Delete…', 'danger');
    del.type = 'button';
    del.dataset.action = 'delete';
    actions.append(details, replay, discard, del);
    tr.append(created, cellText(e.event_type, 'mono'), agg, listener, el('td', e.attempts, 'num'), err, actions);
    if (e.id === state.selected) tr.classList.add('selected');
    return tr;
  }

  async function loadEvents(reset) {
    const params = { ...state.filter, after: reset ? '' : state.next };
    const page = await api('api/dead-events' + query(params));
    const tbody = $('rows');
    if (reset) tbody.replaceChildren();
    for (const e of page.events) tbody.append(row(e));
    state.next = page.next || '';
    $('more').hidden = !state.next;
    $('empty').hidden = tbody.children.length > 0;
  }

  // refresh reloads everything. Until the first load returns, the page shows a loading
  // state; a failure shows an error that says what to do, with a Retry button.
  async function refresh() {
    if ($('app').hidden && $('login').hidden) showStatus('Loading dead events…', false);
    $('refresh').disabled = true;
    $('app').setAttribute('aria-busy', 'true');
    try {
      await Promise.all([loadOverview(), loadCount(), loadEvents(true)]);
      hideStatus();
      showApp();
    } catch (err) {
      if (!(err instanceof APIError && err.status === 401)) showStatus(explain(err), true);
    } finally {
      $('refresh').disabled = false;
      $('app').removeAttribute('aria-busy');
    }
  }

  function setFilter(f) {
    state.filter = { event_type: f.event_type || '', aggregate_type: f.aggregate_type || '', listener: f.listener || '' };
    $('f-event-type').value = state.filter.event_type;
    $('f-aggregate-type').value = state.filter.aggregate_type;
    $('f-listener').value = state.filter.listener;
    refresh();
  }

  async function showDetail(id) {
    const e = await api(eventPath(id));
    state.selected = id;
    for (const tr of $('rows').children) tr.classList.toggle('selected', tr.dataset.id === id);
    const dl = $('detail-fields');
    dl.replaceChildren();
    const fields = [
      ['ID', e.id], ['Status', e.status], ['Event type', e.event_type],
      ['Aggregate', e.aggregate_type + (e.aggregate_id ? ' ' + e.aggregate_id : '')],
      ['Listener', e.listener || '—'],
      ['Tenant', e.tenant_id || '—'], ['Attempts', e.attempts], ['Created', e.created_at],
      ['Dead since', e.status === 'DEAD' && e.done_at ? e.done_at : '—'],
    ];
    if (e.order_key) {
      // An ordered event: under DeadKeyWaits its key's later events wait for it.
      fields.push(['Order key', e.order_key + ' (#' + e.order_seq + ')']);
      if (e.status === 'DEAD') fields.push(['Its key', 'later events of this key wait until it is replayed or deleted (DeadKeyWaits)']);
    }
    for (const [k, v] of fields) dl.append(el('dt', k), el('dd', v));
    $('detail-error').textContent = e.last_error || '—';
    $('detail-headers').textContent = Object.keys(e.headers || {}).length ? JSON.stringify(e.headers, null, 2) : '—';
    $('detail-payload').textContent = JSON.stringify(e.payload, null, 2);
    $('detail-replay').dataset.id = e.id;
    $('detail-replay').disabled = e.status !== 'DEAD';
    $('detail-discard').dataset.id = e.id;
    $('detail-discard').disabled = e.status !== 'DEAD';
    $('detail-delete').dataset.id = e.id;
    $('detail-delete').disabled = e.status !== 'DEAD';
    $('detail').hidden = false;
  }

  function closeDetail() {
    state.selected = '';
    $('detail').hidden = true;
    for (const tr of $('rows').children) tr.classList.remove('selected');
  }

  // ask shows the modal dialog and resolves to true when the user confirms.
  function ask(title, text, okLabel) {
    const d = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okLabel;
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
      const onClose = () => done(false);
      $('confirm-ok').addEventListener('click', onOK);
      $('confirm-cancel').addEventListener('click', onCancel);
      d.addEventListener('close', onClose);
      d.showModal();
      $('confirm-cancel').focus();
    });
  }

  function removeRow(id) {
    for (const tr of [...$('rows').children]) if (tr.dataset.id === id) tr.remove();
    $('empty').hidden = $('rows').children.length > 0;
    if (state.selected === id) closeDetail();
  }

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

  // actOn posts a confirmed action on one DEAD event, takes its row off the list (also
  // when it is not DEAD any more, or gone) and refreshes the counts.
  async function actOn(id, path, done) {
    try {
      await api(eventPath(id) + path, 'POST', {});
      removeRow(id);
      toast(done);
    } catch (err) {
      if (err instanceof APIError && (err.status === 409 || err.status === 404)) {
        removeRow(id);
        toast(err.status === 409 ? 'Event ' + id + ' is not DEAD any more.' : 'Event ' + id + ' no longer exists.', 'bad');
      } else {
        report(err);
        return;
      }
    }
    try {
      await Promise.all([loadOverview(), loadCount()]);
    } catch (err) {
      report(err);
    }
  }

  async function replayAll() {
    let n;
    try {
      n = (await api('api/dead-events/count' + query(state.filter))).count;
    } catch (err) {
      report(err);
      return;
    }
    if (n === 0) {
      toast('No dead events match.');
      return;
    }
    const ok = await ask('Replay ' + n + ' dead event' + (n === 1 ? '' : 's') + '?',
      'Every DEAD event' + filterText(state.filter) + ' goes back to NEW with its attempts reset, ' +
      'and the poller delivers them again. Replay them only after the cause of their failure is fixed.',
      'Replay ' + n);
    if (!ok) return;
    try {
      const r = await api('api/dead-events/replay', 'POST', state.filter);
      toast('Replayed ' + r.replayed + ' event' + (r.replayed === 1 ? '' : 's') + '.');
      closeDetail();
    } catch (err) {
      report(err);
    }
    refresh();
  }

  // ---- wiring ----

  $('rows').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    const id = b.closest('tr').dataset.id;
    if (b.dataset.action === 'details') showDetail(id).catch(report);
    else if (b.dataset.action === 'replay') replayOne(id);
    else if (b.dataset.action === 'discard') discardOne(id);
    else if (b.dataset.action === 'delete') deleteOne(id);
  });
  $('detail-close').addEventListener('click', closeDetail);
  $('detail-replay').addEventListener('click', () => replayOne($('detail-replay').dataset.id));
  $('detail-discard').addEventListener('click', () => discardOne($('detail-discard').dataset.id));
  $('detail-delete').addEventListener('click', () => deleteOne($('detail-delete').dataset.id));
  $('more').addEventListener('click', () => loadEvents(false).catch(report));
  $('replay-all').addEventListener('click', replayAll);
  $('refresh').addEventListener('click', refresh);
  $('status-retry').addEventListener('click', refresh);
  $('clear-filters').addEventListener('click', () => setFilter({}));
  $('filters').addEventListener('submit', (ev) => {
    ev.preventDefault();
    setFilter({
      event_type: $('f-event-type').value.trim(),
      aggregate_type: $('f-aggregate-type').value.trim(),
      listener: $('f-listener').value.trim(),
    });
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

  refresh();
})();
