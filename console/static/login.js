// Login for brokers with http-auth required. The password goes once to
// POST /v1/auth/login, which answers with an HttpOnly, SameSite=Strict
// session cookie: no script (ours or an injected one) can read the
// session, and the password is never stored in the browser.
import { h, api, errorBox } from './lib.js';

// checkLogin asks who the browser is; it shows the login form when the
// broker wants credentials, else renders the page.
export async function checkLogin(render) {
  let who;
  try {
    who = await api('GET', '/v1/auth/whoami');
  } catch (e) {
    if (e.status === 401) return; // 'broker-unauthorized' showed the form
    who = { auth_required: false };
  }
  showWho(who, render);
  render();
}

function showWho(who, render) {
  const el = document.getElementById('who');
  if (!who || !who.auth_required) { el.replaceChildren(); return; }
  el.replaceChildren(
    h('span', { id: 'principal' }, who.principal),
    h('button', { class: 'secondary', id: 'logout', onclick: async () => {
      try { await api('POST', '/v1/auth/logout'); } catch { /* the session may be gone already */ }
      showLogin(render);
    } }, 'Log out'));
}

// showLogin replaces the page with the login form; a successful login
// renders the page again.
export function showLogin(render) {
  document.getElementById('who').replaceChildren();
  const main = document.getElementById('app');
  if (document.getElementById('login-form')) return;
  const user = h('input', { id: 'login-user', name: 'username', autocomplete: 'username', required: true });
  const password = h('input', { id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const status = h('div', {});
  const form = h('form', { id: 'login-form', class: 'login', onsubmit: async (ev) => {
    ev.preventDefault();
    status.replaceChildren();
    try {
      const who = await api('POST', '/v1/auth/login', { user: user.value, password: password.value });
      password.value = '';
      showWho(who, render);
      render();
    } catch (e) {
      password.value = '';
      status.replaceChildren(errorBox(e));
    }
  } },
  h('label', {}, 'User', user),
  h('label', {}, 'Password', password),
  h('button', { type: 'submit', id: 'login-submit' }, 'Log in'),
  status);
  main.replaceChildren(h('div', { 'data-page': 'login', 'data-loaded': 'true' },
    h('h1', {}, 'Log in'),
    h('p', { class: 'muted' }, 'This broker requires authentication: use a broker user (broker users create).'),
    form));
  user.focus();
}
